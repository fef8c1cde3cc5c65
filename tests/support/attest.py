"""Signed evidence in tests: a fabricated receipt record (for the pure statement and
verification tests only; real runs sign real records), signers, and envelope tampering."""

from __future__ import annotations

import base64
import json
from typing import Any

from forkhorse.attest.envelopes import sign_statement
from forkhorse.attest.keys import public_key_json
from forkhorse.attest.statements import receipt_statement
from forkhorse.domain.receipts import ReceiptRecord
from securesystemslib.signer import CryptoSigner

from tests.support.store import COMMIT, record, record_digest

__all__ = ["COMMIT", "record_digest"]

OTHER_COMMIT = "d" * 40
PROJECT = "proj"


def fabricated_record(**changes: Any) -> ReceiptRecord:
    """A passing quick-and-full record as finalize would publish it, with `changes`
    (fabricated for the pure statement and verification tests; real runs sign real ones)."""
    return record().model_copy(update=changes)


def signed_receipt(signer: CryptoSigner, record: ReceiptRecord | None = None) -> dict[str, Any]:
    record = record or fabricated_record()
    return sign_statement(receipt_statement(record, record_digest(record)), signer)


def envelope_bytes(envelope: dict[str, Any]) -> bytes:
    return json.dumps(envelope).encode()


def key_file(signer: CryptoSigner) -> bytes:
    """What `GET /keys` answers for one key."""
    return json.dumps({"keys": [json.loads(public_key_json(signer.public_key))]}).encode()


def payload_of(envelope: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(envelope["payload"])))


def with_payload(envelope: dict[str, Any], payload: bytes) -> dict[str, Any]:
    """The same signatures over different payload bytes (a tampered envelope)."""
    return {**envelope, "payload": base64.b64encode(payload).decode()}


def sign_kms_digests_like_aws(monkeypatch: Any) -> None:
    """moto's KMS signs a DIGEST message as AWS does (tests/support/moto_kms.py)."""
    from moto.kms.responses import KmsResponse

    from tests.support.moto_kms import prehashed_sign

    monkeypatch.setattr(KmsResponse, "sign", prehashed_sign(KmsResponse.sign))
