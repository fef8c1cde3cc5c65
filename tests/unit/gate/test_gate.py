"""The required-mode gate, one reason code at a time, from one passing piece of evidence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from forkhorse.domain.checks import parse_checks, quick_module_digest
from forkhorse.domain.gate import (
    Definitions,
    GateEvidence,
    consent_reasons,
    reason_code,
    validate_required,
)
from forkhorse.domain.model import Approval, Execution
from forkhorse.domain.receipts import CheckRecord, ReceiptRecord

from tests.support.store import T0

COMMIT = "c" * 40
MODULE = ".forkhorse/quick/ok.py"
SOURCE = "def check(ctx):\n    return {'ok': True}\n"
CHECKS = (
    f'[{{"name":"quick","tier":"quick","module":"{MODULE}"}},'
    '{"name":"full","tier":"full","image":"busybox","run":"true"}]'
)
PINNED = "localhost/forkhorse/busybox@sha256:" + "b" * 64


def _record(**changes: Any) -> ReceiptRecord:
    definitions = parse_checks(CHECKS)
    checks = [
        CheckRecord(
            name="quick",
            tier="quick",
            definition=definitions[0].definition(),
            runtime="dynamic-worker",
            platform="local-bwrap",
            image_digest=quick_module_digest(SOURCE),
            outcome="passed",
            message="ok",
            duration_ms=5,
        ),
        CheckRecord(
            name="full",
            tier="full",
            definition=definitions[1].definition(),
            runtime="container",
            platform="podman",
            image_digest=PINNED,
            outcome="passed",
            message="Exited with code 0.",
            duration_ms=200,
        ),
    ]
    fields: dict[str, Any] = {
        "project": "proj",
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


def _evidence(record: ReceiptRecord | None = None, **changes: Any) -> GateEvidence:
    record = record or _record()
    execution = Execution(
        generation=record.generation,
        commit=record.commit,
        trigger=record.trigger,
        summary=record.summary("d" * 64),
    )
    evidence = GateEvidence(
        review_id="r1",
        project_id="proj",
        commit=COMMIT,
        review_commit=COMMIT,
        execution=execution,
        record=record,
        definitions=Definitions(checks=parse_checks(CHECKS)),
        module_sources={MODULE: SOURCE},
    )
    return replace(evidence, **changes)


def _codes(evidence: GateEvidence) -> set[str]:
    return {reason_code(reason) for reason in validate_required(evidence)}


def test_fresh_passing_real_evidence_passes() -> None:
    assert validate_required(_evidence()) == []


def test_missing_evidence() -> None:
    assert _codes(_evidence(execution=None)) == {"missing"}
    assert _codes(replace(_evidence(), record=None)) == {"missing"}


def test_stale_evidence() -> None:
    assert _codes(_evidence(commit="e" * 40)) == {"stale"}
    assert _codes(_evidence(expected_generation="g2")) == {"stale"}
    assert _codes(_evidence(expected_trigger="before-promote")) == {"stale"}
    other = _record(generation="g0")
    assert "stale" in _codes(replace(_evidence(), record=other))


def test_altered_evidence() -> None:
    assert _codes(_evidence(record_altered=True)) == {"altered"}
    assert _codes(_evidence(module_sources={MODULE: SOURCE + "# changed\n"})) == {"altered"}
    assert "altered" in _codes(replace(_evidence(), record=_record(review_id="r2")))
    tampered = _evidence()
    assert tampered.execution is not None
    shown = tampered.execution.summary.model_copy(update={"duration_ms": 1})
    execution = tampered.execution.model_copy(update={"summary": shown})
    assert _codes(replace(tampered, execution=execution)) == {"altered"}


def test_incomplete_evidence() -> None:
    running = _evidence()
    assert running.execution is not None
    summary = running.execution.summary.model_copy(update={"status": "running"})
    execution = running.execution.model_copy(update={"summary": summary})
    assert _codes(replace(running, execution=execution)) == {"incomplete"}
    assert _codes(_evidence(definitions=Definitions(absent=True))) == {"incomplete"}
    assert _codes(_evidence(module_sources={})) == {"incomplete"}
    one = parse_checks(CHECKS)[:1]
    assert _codes(_evidence(definitions=Definitions(checks=one))) == {"incomplete"}


def test_failed_evidence() -> None:
    record = _record(status="failed")
    record = record.model_copy(
        update={
            "checks": [record.checks[0], record.checks[1].model_copy(update={"outcome": "failed"})]
        }
    )
    assert _codes(_evidence(record)) == {"failed"}


@pytest.mark.parametrize(
    ("tier", "code"), [("full", "mocked-container-port"), ("quick", "mocked-worker-loader")]
)
def test_mocked_evidence_never_passes(tier: str, code: str) -> None:
    record = _record()
    checks = [
        check.model_copy(update={"platform": "mock"}) if check.tier == tier else check
        for check in record.checks
    ]
    record = record.model_copy(update={"checks": checks, "evidence": code})
    assert code in _codes(_evidence(record))


def test_consent_for_another_commit() -> None:
    approval = Approval(
        commit="e" * 40,
        owner_id="owner",
        approved_at=T0,
        generation="g1",
        digest=None,
        require_receipt=True,
    )
    assert [reason_code(r) for r in consent_reasons(approval, COMMIT)] == ["consent"]
    assert [reason_code(r) for r in consent_reasons(None, COMMIT)] == ["consent"]
    assert consent_reasons(approval, "e" * 40) == []


def test_a_full_check_listed_before_a_quick_check_still_passes() -> None:
    """The record runs quick checks first whatever the file order; the gate compares in the
    same order, so listing `full` first must not make required mode unpassable."""
    full_first = (
        '[{"name":"full","tier":"full","image":"busybox","run":"true"},'
        f'{{"name":"quick","tier":"quick","module":"{MODULE}"}}]'
    )
    evidence = _evidence(definitions=Definitions(checks=parse_checks(full_first)))
    assert validate_required(evidence) == []
    swapped = _record(checks=list(reversed(_record().checks)))
    assert "incomplete" in _codes(replace(evidence, record=swapped))
