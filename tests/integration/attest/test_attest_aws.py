"""Signed evidence on AWS, in-process: moto's KMS (an ECC_NIST_P256 key) signs through
securesystemslib's AWSSigner, envelopes and keys live in the DynamoDB table, the real
finalize and promote-write handlers sign, and the ApiFunction serves what `verify` checks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key
from forkhorse.adapters.dynamodb.attestations import DynamoDbAttestations
from forkhorse.attest.attestor import NoSigningKey
from forkhorse.cli import main
from forkhorse.wiring import aws as aws_wiring
from forkhorse.wiring.handlers import providers

from tests.support.attest import (
    COMMIT,
    fabricated_record,
    payload_of,
    sign_kms_digests_like_aws,
)
from tests.support.promote import PASSING, AwsWorld
from tests.support.step_functions import REGION
from tests.support.store import record_digest


@pytest.fixture
def kms_key(aws_world: AwsWorld, monkeypatch: pytest.MonkeyPatch) -> str:
    """The deployment's signing key, named to the trusted steps as the template names it."""
    kms = boto3.client("kms", region_name=REGION)
    key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    sign_kms_digests_like_aws(monkeypatch)
    monkeypatch.setenv("FORKHORSE_SIGNING_KEY", key)
    deps = dataclasses.replace(providers.runner(), attestor=aws_wiring.attestor())
    monkeypatch.setattr(providers, "runner", lambda: deps)
    return str(key)


def _save(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def test_kms_signs_at_attach_and_the_api_serves_what_verify_accepts(
    aws_world: AwsWorld, kms_key: str, tmp_path: Path
) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, PASSING)
    review_id = aws_world.approved(lane, commit)
    status, envelope = aws_world.call("GET", f"{aws_world.promotion_path(review_id)}/attestation")
    assert status == 200, envelope
    predicate = payload_of(envelope)["predicate"]
    assert (predicate["commit"], predicate["status"]) == (commit, "passed")
    status, keys = aws_world.call("GET", "/keys")
    assert status == 200, keys
    (key,) = keys["keys"]
    assert (key["keytype"], key["scheme"]) == ("ecdsa", "ecdsa-sha2-nistp256")
    kms = boto3.client("kms", region_name=REGION)
    der = kms.get_public_key(KeyId=kms_key)["PublicKey"]
    # The listed key is the KMS key's own public half.
    assert load_pem_public_key(key["keyval"]["public"].encode()) == load_der_public_key(der)
    key_file, saved = _save(tmp_path / "k.json", keys), _save(tmp_path / "r.json", envelope)
    assert main(["verify", str(saved), "--key", str(key_file), "--commit", commit]) == 0

    # Promote: the write step signs the VSA with the same KMS key.
    status, body = aws_world.call(
        "POST", f"{aws_world.promotion_path(review_id)}/promote", {"commit": commit}
    )
    assert status in (200, 202), body
    status, body = aws_world.settle(review_id)
    assert status == 200, body
    promotion_id = aws_world.promotions(review_id)[-1].id
    vsa_path = f"/projects/{aws_world.project_id}/promotions/{promotion_id}/attestation"
    status, vsa = aws_world.call("GET", vsa_path)
    assert status == 200, vsa
    assert payload_of(vsa)["predicate"]["verificationResult"] == "PASSED"
    _, fresh = aws_world.call("GET", f"{aws_world.promotion_path(review_id)}/attestation")
    fresh_file = _save(tmp_path / "fresh.json", fresh)
    args = ["--key", str(key_file), "--require-passed", "--input", str(fresh_file)]
    assert main(["verify", str(_save(tmp_path / "vsa.json", vsa)), *args]) == 0


def test_a_function_without_the_key_cannot_sign(aws_world: AwsWorld) -> None:
    """The API's attestor reads only: without FORKHORSE_SIGNING_KEY there is no signer."""
    attestor = aws_wiring.attestor()
    assert attestor.signer is None
    record = fabricated_record()
    with pytest.raises(NoSigningKey):
        attestor.attest_receipt(record, record_digest(record), aws_world.clock.now())


def test_envelopes_are_written_once_in_the_table(aws_world: AwsWorld, kms_key: str) -> None:
    attestor = aws_wiring.attestor()
    assert isinstance(attestor.store, DynamoDbAttestations)
    record = fabricated_record()
    digest = record_digest(record)
    attestor.attest_receipt(record, digest, aws_world.clock.now())
    first = attestor.receipt_envelope(digest)
    attestor.attest_receipt(record, digest, aws_world.clock.now())  # a retried finalize
    assert attestor.receipt_envelope(digest) == first
    assert first is not None
    assert payload_of(first)["subject"][0]["digest"] == {"gitCommit": COMMIT}
