"""Receipt statements and promotion VSAs, signed and verified offline; every tampering the
issue lists is refused by the check that should catch it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from forkhorse.attest.envelopes import sign_statement
from forkhorse.attest.keys import load_keys
from forkhorse.attest.statements import (
    RECEIPT_PREDICATE_TYPE,
    PromotionFacts,
    payload_digest,
    promotion_statement,
)
from forkhorse.attest.verify import Expected, Refused, Verified, verify_envelope
from forkhorse.domain.receipts import CheckRecord
from securesystemslib.signer import CryptoSigner

from tests.support.attest import (
    COMMIT,
    OTHER_COMMIT,
    PROJECT,
    envelope_bytes,
    fabricated_record,
    key_file,
    payload_of,
    signed_receipt,
    with_payload,
)


@pytest.fixture(scope="module")
def signer() -> CryptoSigner:
    return CryptoSigner.generate_ecdsa()


@pytest.fixture(scope="module")
def other_signer() -> CryptoSigner:
    return CryptoSigner.generate_ecdsa()


def _verify(envelope: dict[str, Any], signer: CryptoSigner, **expected: Any) -> Verified:
    return verify_envelope(
        envelope_bytes(envelope), load_keys(key_file(signer)), Expected(**expected)
    )


def _refused(envelope: dict[str, Any], signer: CryptoSigner, **expected: Any) -> Refused:
    with pytest.raises(Refused) as refused:
        _verify(envelope, signer, **expected)
    return refused.value


def test_a_signed_receipt_verifies_and_states_the_commit_and_every_check(
    signer: CryptoSigner,
) -> None:
    envelope = signed_receipt(signer)
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert [s["keyid"] for s in envelope["signatures"]] == [signer.public_key.keyid]
    verified = _verify(envelope, signer, commit=COMMIT, project=PROJECT, require_passed=True)
    assert verified.keyid == signer.public_key.keyid
    statement = payload_of(envelope)
    assert statement["subject"] == [
        {"name": f"{PROJECT}@{COMMIT}", "digest": {"gitCommit": COMMIT}}
    ]
    assert statement["predicateType"] == RECEIPT_PREDICATE_TYPE
    predicate = statement["predicate"]
    assert (predicate["trigger"], predicate["evidence"], predicate["mocked"]) == (
        "review-created",
        "mixed",
        False,
    )
    assert [(c["name"], c["tier"], c["runtime"], c["outcome"]) for c in predicate["checks"]] == [
        ("check-0", "quick", "dynamic-worker", "passed"),
        ("check-1", "full", "container", "passed"),
    ]
    assert predicate["checks"][0]["imageDigest"] == "module:sha256:" + "0" * 64
    assert predicate["checks"][1]["imageDigest"] == "sha256:" + "1" * 64
    assert "stdout" not in json.dumps(predicate)  # no logs in a statement


def test_a_changed_predicate_byte_breaks_the_signature(signer: CryptoSigner) -> None:
    envelope = signed_receipt(signer, fabricated_record(status="failed"))
    payload = base64.b64decode(envelope["payload"])
    tampered = payload.replace(b'"status":"failed"', b'"status":"passed"')
    assert tampered != payload
    assert len(tampered) == len(payload)
    refused = _refused(with_payload(envelope, tampered), signer)
    assert refused.check == "signature"


def test_a_swapped_subject_commit_breaks_the_signature(signer: CryptoSigner) -> None:
    envelope = signed_receipt(signer)
    payload = base64.b64decode(envelope["payload"]).replace(COMMIT.encode(), OTHER_COMMIT.encode())
    assert _refused(with_payload(envelope, payload), signer).check == "signature"


def test_evidence_about_another_commit_is_refused(signer: CryptoSigner) -> None:
    refused = _refused(signed_receipt(signer), signer, commit=OTHER_COMMIT)
    assert refused.check == "subject"
    assert refused.message == f"The envelope is about commit {COMMIT}, not {OTHER_COMMIT}."


def test_a_signature_from_another_key_is_refused(
    signer: CryptoSigner, other_signer: CryptoSigner
) -> None:
    refused = _refused(signed_receipt(other_signer), signer)
    assert refused.check == "signature"
    assert other_signer.public_key.keyid in refused.message


def test_an_envelope_for_another_project_is_refused(signer: CryptoSigner) -> None:
    envelope = signed_receipt(signer, fabricated_record(project="elsewhere"))
    refused = _refused(envelope, signer, project=PROJECT)
    assert (refused.check, refused.message) == (
        "subject",
        f"The envelope is for project elsewhere, not {PROJECT}.",
    )


def test_mocked_evidence_is_refused_unless_asked_to_show_it(signer: CryptoSigner) -> None:
    record = fabricated_record(evidence="mocked-container-port")
    envelope = signed_receipt(signer, record)
    assert payload_of(envelope)["predicate"]["mocked"] is True
    assert _refused(envelope, signer).check == "evidence"
    shown = _verify(envelope, signer, show_mocked=True)
    assert shown.mocked
    # Shown is not passed: a mocked pass is never a real pass.
    assert _refused(envelope, signer, show_mocked=True, require_passed=True).check == "outcome"


def test_a_check_on_the_mock_platform_marks_the_receipt_mocked(signer: CryptoSigner) -> None:
    record = fabricated_record()
    mocked_check = record.checks[1].model_copy(update={"platform": "mock"})
    assert isinstance(mocked_check, CheckRecord)
    envelope = signed_receipt(signer, record.model_copy(update={"checks": [mocked_check]}))
    assert _refused(envelope, signer).check == "evidence"


def test_a_failed_receipt_verifies_but_not_as_passed(signer: CryptoSigner) -> None:
    envelope = signed_receipt(signer, fabricated_record(status="failed"))
    assert _verify(envelope, signer).passed[-1] == "outcome: failed"
    refused = _refused(envelope, signer, require_passed=True)
    assert refused.check == "outcome"


def _facts(receipt: dict[str, Any] | None, **changes: Any) -> PromotionFacts:
    payload = None if receipt is None else base64.b64decode(receipt["payload"])
    fields: dict[str, Any] = {
        "project": PROJECT,
        "promotion_id": "p1",
        "review_id": "r1",
        "commit": COMMIT,
        "mode": "required",
        "time_verified": "2026-10-12T16:56:00.000Z",
        "resource_uri": "git+http://127.0.0.1/git/proj/canonical.git@refs/heads/main",
        "record_digest": "e" * 64,
        "record_passed": True,
        "record_mocked": False,
        "receipt_uri": "http://127.0.0.1/projects/proj/reviews/r1/attestation",
        "receipt_payload_digest": None if payload is None else payload_digest(payload),
    }
    fields.update(changes)
    return PromotionFacts(**fields)


def test_a_required_promotion_vsa_passes_and_names_its_input_receipt(
    signer: CryptoSigner,
) -> None:
    receipt = signed_receipt(signer)
    vsa = sign_statement(promotion_statement(_facts(receipt)), signer)
    predicate = payload_of(vsa)["predicate"]
    assert predicate["verificationResult"] == "PASSED"
    assert predicate["verifier"] == {"id": "https://forkhorse.dev/verifier/v1"}
    assert predicate["policy"]["annotations"]["mode"] == "required"
    given = _verify(receipt, signer)
    verified = _verify(vsa, signer, commit=COMMIT, require_passed=True, inputs=(given,))
    assert verified.passed[-1] == "inputs: 1 named, 1 matched"


def test_a_vsa_whose_input_digests_do_not_match_the_receipt_is_refused(
    signer: CryptoSigner,
) -> None:
    named = signed_receipt(signer)
    other = signed_receipt(signer, fabricated_record(generation="g2"))
    vsa = sign_statement(promotion_statement(_facts(named)), signer)
    refused = _refused(vsa, signer, inputs=(_verify(other, signer),))
    assert refused.check == "inputs"


def test_an_advisory_promotion_never_passes(signer: CryptoSigner) -> None:
    receipt = signed_receipt(signer)
    vsa = sign_statement(promotion_statement(_facts(receipt, mode="advisory")), signer)
    predicate = payload_of(vsa)["predicate"]
    assert (predicate["verificationResult"], predicate["verifiedLevels"]) == ("FAILED", ["FAILED"])
    assert predicate["policy"]["uri"].endswith("/advisory-receipts/v1")
    assert _refused(vsa, signer, require_passed=True).check == "outcome"


def test_a_required_promotion_on_mocked_evidence_does_not_pass(signer: CryptoSigner) -> None:
    vsa = sign_statement(promotion_statement(_facts(None, record_mocked=True)), signer)
    assert payload_of(vsa)["predicate"]["verificationResult"] == "FAILED"


@pytest.mark.parametrize(
    ("data", "check"),
    [
        (b"not json", "envelope"),
        (b'{"payload": "", "payloadType": "text/plain", "signatures": []}', "envelope"),
    ],
)
def test_what_is_not_an_in_toto_envelope_is_refused(
    signer: CryptoSigner, data: bytes, check: str
) -> None:
    with pytest.raises(Refused) as refused:
        verify_envelope(data, load_keys(key_file(signer)), Expected())
    assert refused.value.check == check


def test_a_signed_statement_of_unknown_shape_is_refused(signer: CryptoSigner) -> None:
    statement = payload_of(signed_receipt(signer))
    del statement["predicate"]["checks"]
    envelope = sign_statement(statement, signer)
    refused = _refused(envelope, signer)
    assert refused.check == "statement"
    assert "checks" in refused.message
