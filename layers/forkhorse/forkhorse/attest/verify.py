"""Offline verification of a Forkhorse envelope: signature, statement, subject, evidence,
outcome and (for a VSA) its input attestations, each check named when it refuses."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from securesystemslib.exceptions import FormatError, VerificationError
from securesystemslib.signer import Key

from forkhorse.attest.envelopes import parse_envelope
from forkhorse.attest.statements import (
    PAYLOAD_TYPE,
    RECEIPT_PREDICATE_TYPE,
    VSA_PREDICATE_TYPE,
    ReceiptStatement,
    VsaStatement,
    payload_digest,
    subject_name,
)

Statement = ReceiptStatement | VsaStatement


class Refused(Exception):
    """One check refused the envelope; `check` names it, the message says why."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(message)
        self.check = check
        self.message = message

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


@dataclass(frozen=True)
class Expected:
    """What the verifier requires beyond a valid signature."""

    commit: str | None = None
    project: str | None = None
    require_passed: bool = False
    show_mocked: bool = False
    # Input attestations (already verified) a VSA must name, by their payloads.
    inputs: tuple[Verified, ...] = ()


@dataclass(frozen=True)
class Verified:
    statement: Statement
    keyid: str
    payload: bytes
    passed: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "receipt" if isinstance(self.statement, ReceiptStatement) else "vsa"

    @property
    def mocked(self) -> bool:
        return isinstance(self.statement, ReceiptStatement) and self.statement.predicate.mocked


def verify_envelope(data: bytes, keys: Sequence[Key], expected: Expected) -> Verified:
    """The verified statement, or `Refused` naming the first check that failed."""
    envelope = _envelope(data)
    keyid = _signature(envelope, keys)
    statement = _statement(envelope)
    passed = [f"signature: signed by key {keyid}", f"statement: {statement.predicate_type}"]
    passed.append(_subject(statement, expected))
    passed.append(_evidence(statement, expected))
    passed.append(_outcome(statement, expected))
    if isinstance(statement, VsaStatement):
        passed.append(_inputs(statement, expected))
    return Verified(statement, keyid, envelope["payload_bytes"], passed)


def _envelope(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
        envelope = parse_envelope(value)
    except (ValueError, KeyError, TypeError, FormatError):
        raise Refused("envelope", "The file is not a DSSE envelope.") from None
    if envelope.payload_type != PAYLOAD_TYPE:
        raise Refused("envelope", f"The payload type is not {PAYLOAD_TYPE}.")
    if not envelope.signatures:
        raise Refused("envelope", "The envelope has no signature.")
    return {"envelope": envelope, "payload_bytes": envelope.payload}


def _signature(parsed: dict[str, Any], keys: Sequence[Key]) -> str:
    envelope = parsed["envelope"]
    try:
        accepted = envelope.verify(list(keys), 1)
    except (VerificationError, ValueError):
        ids = ", ".join(sorted(envelope.signatures)) or "none"
        raise Refused(
            "signature", f"No signature verifies with the given key (envelope signed by {ids})."
        ) from None
    return str(next(iter(accepted)))


def _statement(parsed: dict[str, Any]) -> Statement:
    try:
        value = json.loads(parsed["payload_bytes"])
    except ValueError:
        raise Refused("statement", "The payload is not JSON.") from None
    kind = value.get("predicateType") if isinstance(value, dict) else None
    model: type[Statement]
    if kind == RECEIPT_PREDICATE_TYPE:
        model = ReceiptStatement
    elif kind == VSA_PREDICATE_TYPE:
        model = VsaStatement
    else:
        raise Refused("statement", f"Unknown predicate type: {kind!r}.")
    try:
        statement = model.model_validate(value)
    except ValidationError as invalid:
        first = invalid.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = f"The statement is malformed at {where}: {first['msg']}."
        raise Refused("statement", message) from None
    if isinstance(statement, ReceiptStatement):
        predicate = statement.predicate
        expected_name = subject_name(predicate.project, predicate.commit)
        if statement.the_subject.name != expected_name or statement.the_subject.commit != (
            predicate.commit
        ):
            raise Refused("statement", "The subject does not match the predicate's commit.")
    return statement


def _project_of(statement: Statement) -> str:
    if isinstance(statement, ReceiptStatement):
        return statement.predicate.project
    return statement.the_subject.name.rsplit("@", 1)[0]


def _subject(statement: Statement, expected: Expected) -> str:
    commit = statement.the_subject.commit
    if expected.commit is not None and commit != expected.commit:
        raise Refused("subject", f"The envelope is about commit {commit}, not {expected.commit}.")
    project = _project_of(statement)
    if expected.project is not None and project != expected.project:
        raise Refused("subject", f"The envelope is for project {project}, not {expected.project}.")
    return f"subject: {statement.the_subject.name}"


def _evidence(statement: Statement, expected: Expected) -> str:
    if not isinstance(statement, ReceiptStatement):
        annotations = statement.predicate.policy.annotations or {}
        mode = annotations.get("mode")
        return f"evidence: {mode} policy"
    predicate = statement.predicate
    if predicate.mocked and not expected.show_mocked:
        raise Refused(
            "evidence",
            f"The receipt's evidence is mocked ({predicate.evidence}); "
            "pass --show-mocked to inspect it anyway.",
        )
    label = f"{predicate.evidence} (mocked)" if predicate.mocked else predicate.evidence
    return f"evidence: {label}"


def _outcome(statement: Statement, expected: Expected) -> str:
    outcome: str
    if isinstance(statement, ReceiptStatement):
        outcome = statement.predicate.status
        passed = outcome == "passed" and not statement.predicate.mocked
    else:
        outcome = statement.predicate.verification_result
        passed = outcome == "PASSED"
    if expected.require_passed and not passed:
        raise Refused("outcome", f"The outcome is {outcome}, not passed on real evidence.")
    return f"outcome: {outcome}"


def _inputs(statement: VsaStatement, expected: Expected) -> str:
    named = {item.digest.sha256 for item in statement.predicate.input_attestations if item.digest}
    for given in expected.inputs:
        digest = payload_digest(given.payload)
        if digest not in named:
            raise Refused(
                "inputs",
                f"The {given.kind} attestation given (sha256 {digest}) is not among the "
                "VSA's input attestations.",
            )
        if given.statement.the_subject.commit != statement.the_subject.commit:
            raise Refused("inputs", "An input attestation is about another commit.")
    return f"inputs: {len(named)} named, {len(expected.inputs)} matched"
