"""Signed evidence in tests: a fabricated receipt record (for the pure statement and
verification tests only; real runs sign real records), signers, and envelope tampering."""

from __future__ import annotations

import base64
import json
from typing import Any

from forkhorse.attest.envelopes import sign_statement
from forkhorse.attest.keys import public_key_json
from forkhorse.attest.statements import receipt_statement, statement_bytes
from forkhorse.domain.canonical import digest_of
from forkhorse.domain.checks import parse_checks
from forkhorse.domain.receipts import CheckRecord, ReceiptRecord
from securesystemslib.signer import CryptoSigner

COMMIT = "c" * 40
OTHER_COMMIT = "d" * 40
PROJECT = "proj"
PINNED = "localhost/forkhorse/busybox@sha256:" + "b" * 64
MODULE_DIGEST = "module:sha256:" + "a" * 64
CHECKS = (
    '[{"name":"quick","tier":"quick","module":".forkhorse/quick/ok.py"},'
    '{"name":"full","tier":"full","image":"busybox","run":"true"}]'
)


def fabricated_record(**changes: Any) -> ReceiptRecord:
    """A passing two-check record, as finalize would publish it (fabricated for unit tests)."""
    quick, full = parse_checks(CHECKS)
    checks = [
        CheckRecord(
            name="quick",
            tier="quick",
            definition=quick.definition(),
            runtime="dynamic-worker",
            platform="local-bwrap",
            image_digest=MODULE_DIGEST,
            outcome="passed",
            message="ok",
            duration_ms=5,
        ),
        CheckRecord(
            name="full",
            tier="full",
            definition=full.definition(),
            runtime="container",
            platform="podman",
            image_digest=PINNED,
            outcome="passed",
            message="Exited with code 0.",
            duration_ms=200,
        ),
    ]
    fields: dict[str, Any] = {
        "project": PROJECT,
        "review_id": "r1",
        "commit": COMMIT,
        "tree": "t" * 40,
        "generation": "g1",
        "trigger": "review-created",
        "status": "passed",
        "evidence": "mixed",
        "platform": "local-bwrap+podman",
        "started_at": "2026-10-12T16:55:00.000Z",
        "finished_at": "2026-10-12T16:55:01.000Z",
        "duration_ms": 1000,
        "checks": checks,
    }
    fields.update(changes)
    return ReceiptRecord(**fields)


def record_digest(record: ReceiptRecord) -> str:
    return digest_of(statement_bytes(record.model_dump(mode="json")))


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
