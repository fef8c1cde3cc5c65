"""The envelope's ceiling: the largest checks the parser accepts (64 checks, 64-character
names) still sign to an envelope under ATTESTATION.envelope_bytes, since statements carry no logs
or messages; `verify` reads no more than that bound (tests/unit/attest/test_verify_cli.py)."""

from __future__ import annotations

import json

from forkhorse.domain.checks import MAX_CHECKS, MAX_CHECKS_FILE_BYTES, parse_checks
from forkhorse.domain.limits import ATTESTATION
from forkhorse.domain.receipts import CheckRecord
from securesystemslib.signer import CryptoSigner

from tests.support.attest import envelope_bytes, fabricated_record, signed_receipt

PINNED = "localhost/forkhorse/busybox@sha256:" + "b" * 64


def _largest_checks_file() -> str:
    """64 full checks with the longest names the parser accepts (64 characters)."""
    checks = [
        {"name": f"{index:02d}" + "n" * 62, "tier": "full", "image": "busybox", "run": "true"}
        for index in range(MAX_CHECKS)
    ]
    text = json.dumps(checks)
    assert len(text.encode()) <= MAX_CHECKS_FILE_BYTES
    return text


def test_the_largest_checks_file_signs_under_the_envelope_bound() -> None:
    definitions = parse_checks(_largest_checks_file())
    assert len(definitions) == MAX_CHECKS
    checks = [
        CheckRecord(
            name=definition.name,
            tier="full",
            definition=definition.definition(),
            runtime="container",
            platform="podman",
            image_digest=PINNED,
            outcome="passed",
            message="m" * 4096,  # messages stay out of the statement
            duration_ms=1,
        )
        for definition in definitions
    ]
    envelope = signed_receipt(CryptoSigner.generate_ecdsa(), fabricated_record(checks=checks))
    size = len(envelope_bytes(envelope))
    print(f"\n[bound] largest receipt envelope: {size} bytes of {ATTESTATION.envelope_bytes}")
    assert size < ATTESTATION.envelope_bytes / 4
