"""Signed evidence as owners, agents and verifiers see it.

Reading: the DSSE envelope of a review's attached record (its owner and its reviewing
agent), of a done promotion, and the public keys. Signing a VSA is the promote-write
step's (`service.promote.attest`).
"""

from __future__ import annotations

from forkhorse.attest.attestor import Attestor
from forkhorse.responses import DsseEnvelope, KeyList
from forkhorse.service.context import Context
from forkhorse.service.errors import Forbidden, NotFound
from forkhorse.service.identity import Caller

NO_RECEIPT_ATTESTATION = "No signed attestation exists for this review's receipt."
NO_PROMOTION_ATTESTATION = "No signed attestation exists for this promotion."
NOT_CONFIGURED = "This deployment does not sign evidence."
PROMOTION_NOT_FOUND = "Promotion not found."
NOT_REVIEWING_AGENT = "Only the project's owner and the reviewing agent may read it."
ACTION = "read attestations"


def receipt_attestation_path(project_id: str, review_id: str) -> str:
    return f"/projects/{project_id}/reviews/{review_id}/attestation"


class Attestations:
    def __init__(self, context: Context) -> None:
        self._c = context

    def _attestor(self) -> Attestor:
        if self._c.attestor is None:
            raise NotFound(NOT_CONFIGURED)
        return self._c.attestor

    def review(self, caller: Caller, project_id: str, review_id: str) -> DsseEnvelope:
        """The envelope of the review's attached record."""
        project = self._c.visible_project(caller, project_id, ACTION)
        review = self._c.visible_review(caller, project, review_id)
        if caller.is_agent and review.agent_id != caller.id:
            raise Forbidden(NOT_REVIEWING_AGENT)
        digest = None if review.execution is None else review.execution.digest
        envelope = None if digest is None else self._attestor().receipt_envelope(digest)
        if envelope is None:
            raise NotFound(NO_RECEIPT_ATTESTATION)
        return DsseEnvelope.model_validate(envelope)

    def promotion(self, caller: Caller, project_id: str, promotion_id: str) -> DsseEnvelope:
        """The VSA of a done promotion."""
        project = self._c.visible_project(caller, project_id, ACTION)
        promotion = self._c.store.get_promotion(project.id, promotion_id)
        if promotion is None:
            raise NotFound(PROMOTION_NOT_FOUND)
        if caller.is_agent:
            review = self._c.store.get_review(promotion.review_id)
            if review is None or review.agent_id != caller.id:
                raise Forbidden(NOT_REVIEWING_AGENT)
        envelope = self._attestor().promotion_envelope(project.id, promotion.id)
        if envelope is None:
            raise NotFound(NO_PROMOTION_ATTESTATION)
        return DsseEnvelope.model_validate(envelope)

    def keys(self) -> KeyList:
        """Every public key that signed here, with its id; rotated keys stay listed."""
        return KeyList.model_validate(
            {"keys": [] if self._c.attestor is None else self._c.attestor.keys()}
        )
