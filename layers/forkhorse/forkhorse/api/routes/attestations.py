"""A review's and a promotion's DSSE envelope, and the public keys that verify them."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from forkhorse.api.guards import caller_of
from forkhorse.api.routes.answers import answers, ok
from forkhorse.api.routes.operations import EVIDENCE, operation
from forkhorse.responses import DsseEnvelope, KeyList
from forkhorse.service.attestations import Attestations

KEYS_PATH = "/keys"


class AttestationRoutes:
    def __init__(self, attestations: Attestations) -> None:
        self._attestations = attestations
        self.router = Router()  # type: ignore[no-untyped-call]
        get = self.router.get
        get(
            "/projects/<project_id>/reviews/<review_id>/attestation",
            description="The signed in-toto statement of the attached receipt (owner, its agent).",
            responses=answers(200, ok("A DSSE envelope.")),
            **operation("getReviewAttestation", "The review's signed statement.", EVIDENCE),
        )(self.review)
        get(
            "/projects/<project_id>/promotions/<promotion_id>/attestation",
            description="The signed SLSA verification summary of a done promotion.",
            responses=answers(200, ok("A DSSE envelope.")),
            **operation("getPromotionAttestation", "The promotion's signed summary.", EVIDENCE),
        )(self.promotion)
        get(
            KEYS_PATH,
            description="The public keys that sign evidence, with their ids (public).",
            responses=answers(200, ok("The keys, oldest first; `current` marks the signing one.")),
            **operation("listKeys", "The public keys that verify evidence.", EVIDENCE, public=True),
        )(self.keys)

    def review(self, project_id: str, review_id: str) -> DsseEnvelope:
        return self._attestations.review(caller_of(self.router), project_id, review_id)

    def promotion(self, project_id: str, promotion_id: str) -> DsseEnvelope:
        return self._attestations.promotion(caller_of(self.router), project_id, promotion_id)

    def keys(self) -> KeyList:
        return self._attestations.keys()
