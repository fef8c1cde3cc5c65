"""The statements Forkhorse signs, built from its records, and their strict shapes.

A receipt statement is an in-toto Statement v1 about the reviewed commit with Forkhorse's
own receipt predicate; a promotion statement is a SLSA Verification Summary (VSA v1) about
the commit canonical moved to. Both are pure: no keys, no storage.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from forkhorse.domain.canonical import canonical_bytes, digest_of
from forkhorse.domain.receipts import (
    MOCKED_EVIDENCE,
    Evidence,
    FinalOutcome,
    Outcome,
    ReceiptRecord,
    Runtime,
    Tier,
    Trigger,
)
from forkhorse.domain.run import MOCK_PLATFORM

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
RECEIPT_PREDICATE_TYPE = "https://forkhorse.dev/attestations/receipt/v1"
VSA_PREDICATE_TYPE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://forkhorse.dev/verifier/v1"
REQUIRED_POLICY_URI = "https://forkhorse.dev/policy/required-receipts/v1"
ADVISORY_POLICY_URI = "https://forkhorse.dev/policy/advisory-receipts/v1"
REQUIRED_LEVEL = "FORKHORSE_REQUIRED_RECEIPTS_V1"
COMMIT_PATTERN = r"^[0-9a-f]{40}$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"

PolicyMode = Literal["required", "advisory"]
VerificationResult = Literal["PASSED", "FAILED"]


class _Shape(BaseModel):
    """Statements as they are on the wire: camelCase as written here, nothing unknown."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)


class CommitDigest(_Shape):
    git_commit: str = Field(alias="gitCommit", pattern=COMMIT_PATTERN)


class Subject(_Shape):
    name: str
    digest: CommitDigest

    @property
    def commit(self) -> str:
        return self.digest.git_commit


class Sha256Digest(_Shape):
    sha256: str = Field(pattern=SHA256_PATTERN)


class AttestedCheck(_Shape):
    """One check as the predicate states it: no logs, no message, only what it was."""

    name: str
    tier: Tier
    runtime: Runtime | None = None
    platform: str
    outcome: Outcome
    # The pinned image (`…@sha256:…`) of a full check, `module:sha256:…` of a quick one.
    digest: str = Field(alias="imageDigest")


class ReceiptPredicate(_Shape):
    record: Sha256Digest
    project: str
    review_id: str = Field(alias="reviewId")
    commit: str = Field(pattern=COMMIT_PATTERN)
    tree: str
    generation: str
    trigger: Trigger
    status: FinalOutcome
    evidence: Evidence
    mocked: bool
    platform: str
    started_at: str = Field(alias="startedAt")
    finished_at: str = Field(alias="finishedAt")
    checks: list[AttestedCheck]


class ResourceDescriptor(_Shape):
    uri: str
    digest: Sha256Digest | None = None
    annotations: dict[str, str | bool | None] | None = None


class Verifier(_Shape):
    id: str


class VsaPredicate(_Shape):
    verifier: Verifier
    time_verified: str = Field(alias="timeVerified")
    resource_uri: str = Field(alias="resourceUri")
    policy: ResourceDescriptor
    input_attestations: list[ResourceDescriptor] = Field(alias="inputAttestations")
    verification_result: VerificationResult = Field(alias="verificationResult")
    verified_levels: list[str] = Field(alias="verifiedLevels")
    slsa_version: Literal["1.0"] = Field(default="1.0", alias="slsaVersion")


class _Statement(_Shape):
    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: list[Subject] = Field(min_length=1, max_length=1)

    @property
    def the_subject(self) -> Subject:
        return self.subject[0]


class ReceiptStatement(_Statement):
    predicate_type: Literal["https://forkhorse.dev/attestations/receipt/v1"] = Field(
        alias="predicateType"
    )
    predicate: ReceiptPredicate


class VsaStatement(_Statement):
    predicate_type: Literal["https://slsa.dev/verification_summary/v1"] = Field(
        alias="predicateType"
    )
    predicate: VsaPredicate


def subject_name(project: str, commit: str) -> str:
    return f"{project}@{commit}"


def _subject(project: str, commit: str) -> dict[str, object]:
    return {"name": subject_name(project, commit), "digest": {"gitCommit": commit}}


def is_mocked(record: ReceiptRecord) -> bool:
    """Mocked anywhere: the record's label, or any check that ran on the mock platform."""
    return record.evidence in MOCKED_EVIDENCE or any(
        check.platform == MOCK_PLATFORM for check in record.checks
    )


def receipt_statement(record: ReceiptRecord, digest: str) -> dict[str, object]:
    """The in-toto statement of an attached record whose canonical bytes hash to `digest`."""
    predicate = {
        "record": {"sha256": digest},
        "project": record.project,
        "reviewId": record.review_id,
        "commit": record.commit,
        "tree": record.tree,
        "generation": record.generation,
        "trigger": record.trigger,
        "status": record.status,
        "evidence": record.evidence,
        "mocked": is_mocked(record),
        "platform": record.platform,
        "startedAt": record.started_at,
        "finishedAt": record.finished_at,
        "checks": [
            {
                "name": check.name,
                "tier": check.tier,
                **({"runtime": check.runtime} if check.runtime else {}),
                "platform": check.platform,
                "outcome": check.outcome,
                "imageDigest": check.image_digest,
            }
            for check in record.checks
        ],
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [_subject(record.project, record.commit)],
        "predicateType": RECEIPT_PREDICATE_TYPE,
        "predicate": predicate,
    }


def payload_digest(payload: bytes) -> str:
    """How a VSA names an input attestation: the SHA-256 of its envelope's payload."""
    return digest_of(payload)


def statement_bytes(statement: dict[str, object]) -> bytes:
    return canonical_bytes(statement)


class PromotionFacts(BaseModel):
    """What a settled promotion is, as the VSA states it."""

    model_config = ConfigDict(frozen=True)

    project: str
    promotion_id: str
    review_id: str
    commit: str
    mode: PolicyMode
    time_verified: str
    resource_uri: str
    # The receipt the promotion relied on (the before-promote run's in required mode, the
    # one known at promotion in advisory mode), and its statement's payload digest.
    record_digest: str | None
    record_passed: bool
    record_mocked: bool
    receipt_uri: str | None
    receipt_payload_digest: str | None


def verification_result(facts: PromotionFacts) -> VerificationResult:
    """PASSED only on required, passing, real evidence: advisory evidence never passes."""
    real = facts.record_passed and not facts.record_mocked
    passed = facts.mode == "required" and real and facts.receipt_payload_digest is not None
    return "PASSED" if passed else "FAILED"


def promotion_statement(facts: PromotionFacts) -> dict[str, object]:
    result = verification_result(facts)
    inputs = []
    if facts.receipt_uri is not None and facts.receipt_payload_digest is not None:
        inputs.append(
            {"uri": facts.receipt_uri, "digest": {"sha256": facts.receipt_payload_digest}}
        )
    required = facts.mode == "required"
    predicate = {
        "verifier": {"id": VERIFIER_ID},
        "timeVerified": facts.time_verified,
        "resourceUri": facts.resource_uri,
        "policy": {
            "uri": REQUIRED_POLICY_URI if required else ADVISORY_POLICY_URI,
            "annotations": {
                "mode": facts.mode,
                "requireReceipt": required,
                "promotionId": facts.promotion_id,
                "reviewId": facts.review_id,
                # required: the fresh before-promote record; advisory: the one known then
                "beforePromoteDigest" if required else "knownDigest": facts.record_digest,
                "mocked": facts.record_mocked,
            },
        },
        "inputAttestations": inputs,
        "verificationResult": result,
        # The SLSA VSA spec: the levels verified, or "FAILED" when policy verification failed.
        "verifiedLevels": [REQUIRED_LEVEL] if result == "PASSED" else ["FAILED"],
        "slsaVersion": "1.0",
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [_subject(facts.project, facts.commit)],
        "predicateType": VSA_PREDICATE_TYPE,
        "predicate": predicate,
    }


__all__ = [
    "PAYLOAD_TYPE",
    "RECEIPT_PREDICATE_TYPE",
    "VSA_PREDICATE_TYPE",
    "ReceiptStatement",
    "VsaStatement",
    "promotion_statement",
    "receipt_statement",
]
