"""Signing at the trusted steps, and reading what was signed.

The finalize step signs a record's statement before it attaches it (so an attached digest
always has its envelope, as chunks come before the manifest); the promote-write step signs a
VSA once canonical moved. Elsewhere (the API) an `Attestor` has no signer and only reads.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from forkhorse.attest.envelopes import envelope_text, parse_envelope, sign_statement
from forkhorse.attest.keys import public_key_json
from forkhorse.attest.statements import (
    PromotionFacts,
    payload_digest,
    promotion_statement,
    receipt_statement,
)
from forkhorse.domain.receipts import ReceiptRecord, format_timestamp
from forkhorse.ports.attestations import (
    AttestationStore,
    RegisteredKey,
    promotion_subject,
    receipt_subject,
)
from forkhorse.ports.signer import EvidenceSigner

log = logging.getLogger(__name__)


# Called with a new envelope's text before it is stored (the log notes its intent there).
BeforePut = Callable[[str], None] | None


class NoSigningKey(RuntimeError):
    """This role holds no key: only the trusted steps sign."""


@dataclass(frozen=True)
class Attestor:
    store: AttestationStore
    signer: EvidenceSigner | None = None

    # --- signing (the trusted steps) --------------------------------------------------
    def _sign(
        self, subject: str, statement: dict[str, object], now: datetime, before_put: BeforePut
    ) -> None:
        if self.signer is None:
            raise NoSigningKey("this function may not sign evidence")
        if self.store.get_envelope(subject) is not None:
            return  # signed already (a retried step): the first envelope stands
        self.install_key(now)
        text = envelope_text(sign_statement(statement, self.signer))
        if before_put is not None:
            before_put(text)
        self.store.put_envelope(subject, text, now)

    def install_key(self, now: datetime) -> None:
        """List the signer's public key (from its first use on; rotated keys stay)."""
        if self.signer is None:
            raise NoSigningKey("this function may not sign evidence")
        key = self.signer.public_key
        self.store.register_key(key.keyid, public_key_json(key), now)

    def attest_receipt(
        self, record: ReceiptRecord, digest: str, now: datetime, before_put: BeforePut = None
    ) -> None:
        self._sign(receipt_subject(digest), receipt_statement(record, digest), now, before_put)

    def attest_promotion(
        self, facts: PromotionFacts, now: datetime, before_put: BeforePut = None
    ) -> None:
        subject = promotion_subject(facts.project, facts.promotion_id)
        self._sign(subject, promotion_statement(facts), now, before_put)

    def close(self) -> None:
        self.store.close()

    # --- reading --------------------------------------------------------------------
    def _envelope(self, subject: str) -> dict[str, Any] | None:
        text = self.store.get_envelope(subject)
        return None if text is None else dict(json.loads(text))

    def receipt_envelope(self, record_digest: str) -> dict[str, Any] | None:
        return self._envelope(receipt_subject(record_digest))

    def promotion_envelope(self, project_id: str, promotion_id: str) -> dict[str, Any] | None:
        return self._envelope(promotion_subject(project_id, promotion_id))

    def receipt_payload_digest(self, record_digest: str) -> str | None:
        """How a VSA names this record's receipt attestation (None if it has none)."""
        envelope = self.receipt_envelope(record_digest)
        if envelope is None:
            return None
        return payload_digest(parse_envelope(envelope).payload)

    def keys(self) -> list[dict[str, Any]]:
        """The registry, oldest first; the newest is the one signing now."""
        registered = self.store.list_keys()
        return [_key_json(key, key is registered[-1]) for key in registered]


def _key_json(key: RegisteredKey, current: bool) -> dict[str, Any]:
    return {**json.loads(key.public_key), "since": format_timestamp(key.since), "current": current}
