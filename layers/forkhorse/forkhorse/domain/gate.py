"""The required-mode gate: does the attached evidence prove this exact commit passed? Pure.

The service gathers the facts (the review's current execution, the attached record read
and verified by digest, the exact commit's `.forkhorse/checks` and each quick module's
source read again from that commit) and this module decides. Each refusal is one reason,
`"<code>: <sentence>"`, with the code one of `ReasonCode`; the API returns the list in
`reasons` and the console shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from forkhorse.domain.checks import CheckDef, QuickCheckDef, in_run_order, quick_module_digest
from forkhorse.domain.model import Approval, Execution
from forkhorse.domain.receipts import (
    MOCKED_EVIDENCE,
    RUNTIME_OF_TIER,
    CheckRecord,
    ReceiptRecord,
    Trigger,
)
from forkhorse.domain.run import MOCK_EVIDENCE_OF_TIER, MOCK_PLATFORM

ReasonCode = Literal[
    "missing",
    "stale",
    "altered",
    "incomplete",
    "failed",
    "mocked-container-port",
    "mocked-worker-loader",
    "consent",
    "checks-changed",
]
PINNED_PREFIX = "@sha256:"


@dataclass(frozen=True)
class Definitions:
    """The exact commit's checks: parsed, absent (`None` file) or invalid (`error`)."""

    checks: Sequence[CheckDef] = ()
    absent: bool = False
    error: str | None = None


@dataclass(frozen=True)
class GateEvidence:
    """Everything the gate looks at, read by the service from the Store and the commit."""

    review_id: str
    project_id: str
    commit: str
    review_commit: str
    execution: Execution | None
    record: ReceiptRecord | None
    definitions: Definitions
    # Quick module path -> its source read from the exact commit (None when unreadable).
    module_sources: Mapping[str, str | None] = field(default_factory=dict)
    record_altered: bool = False
    # The record's bytes match its digest but the receipt schema refuses them.
    record_refused: bool = False
    # Promote pins its own fresh run; approval accepts the current one.
    expected_generation: str | None = None
    expected_trigger: Trigger | None = None


def gate_reason(code: ReasonCode, sentence: str) -> str:
    return f"{code}: {sentence}"


def reason_code(reason: str) -> str:
    return reason.split(":", 1)[0]


def consent_reasons(approval: Approval | None, commit: str) -> list[str]:
    """Promote needs owner consent for exactly this commit."""
    if approval is None:
        return [gate_reason("consent", "The owner has not approved this review.")]
    if approval.commit != commit:
        return [
            gate_reason(
                "consent",
                f"The approval is for commit {approval.commit}, not {commit}.",
            )
        ]
    return []


def validate_required(evidence: GateEvidence) -> list[str]:
    """Every reason the evidence fails the required gate; empty when it passes."""
    reasons = _execution_reasons(evidence)
    if reasons:
        return reasons
    record = evidence.record
    if evidence.record_altered:
        return [gate_reason("altered", "The attached record does not match its digest.")]
    if evidence.record_refused:
        return [gate_reason("altered", "The attached record is not a valid receipt record.")]
    if record is None:
        return [gate_reason("missing", "The attached record is not in the store.")]
    reasons = _record_binding_reasons(evidence, record)
    reasons += _outcome_reasons(record)
    reasons += _definition_reasons(evidence, record)
    return reasons


def _execution_reasons(evidence: GateEvidence) -> list[str]:
    execution = evidence.execution
    commit = evidence.commit
    if evidence.review_commit != commit:
        return [
            gate_reason("stale", f"The review is at commit {evidence.review_commit}, not {commit}.")
        ]
    if execution is None:
        return [gate_reason("missing", "No receipt was run for this commit.")]
    if execution.commit != commit:
        return [
            gate_reason("stale", f"The receipt is for commit {execution.commit}, not {commit}.")
        ]
    expected = evidence.expected_generation
    if expected is not None and execution.generation != expected:
        return [gate_reason("stale", "A newer run replaced the receipt this request started.")]
    trigger = evidence.expected_trigger
    if trigger is not None and execution.trigger != trigger:
        return [
            gate_reason(
                "stale", f"The receipt was triggered by {execution.trigger}, not {trigger}."
            )
        ]
    status = execution.summary.status
    if status == "running":
        return [gate_reason("incomplete", "The checks are still running.")]
    if status != "passed":
        return [gate_reason("failed", f"The checks ended {status}.")]
    if execution.digest is None:
        return [gate_reason("missing", "No record is attached to the receipt.")]
    return []


def _record_binding_reasons(evidence: GateEvidence, record: ReceiptRecord) -> list[str]:
    execution = evidence.execution
    assert execution is not None  # checked by _execution_reasons
    reasons: list[str] = []
    if record.commit != evidence.commit:
        reasons.append(gate_reason("stale", f"The record is for commit {record.commit}."))
    if record.generation != execution.generation:
        reasons.append(gate_reason("stale", "The record belongs to another run of this review."))
    if (record.project, record.review_id) != (evidence.project_id, evidence.review_id):
        reasons.append(gate_reason("altered", "The record belongs to another review."))
    if record.trigger != execution.trigger:
        reasons.append(gate_reason("altered", "The record's trigger differs from the run's."))
    if record.summary(execution.digest) != execution.summary:
        reasons.append(gate_reason("altered", "The shown summary differs from the record."))
    return reasons


def _outcome_reasons(record: ReceiptRecord) -> list[str]:
    reasons: list[str] = []
    if record.status != "passed":
        reasons.append(gate_reason("failed", f"The record's status is {record.status}."))
    for check in record.checks:
        if check.outcome != "passed":
            reasons.append(gate_reason("failed", f"Check {check.name} ended {check.outcome}."))
    if record.evidence in MOCKED_EVIDENCE:
        reasons.append(_mocked(record.evidence))
    for check in record.checks:
        if check.platform == MOCK_PLATFORM:
            reasons.append(_mocked(MOCK_EVIDENCE_OF_TIER[check.tier], check.name))
    return list(dict.fromkeys(reasons))


def _mocked(label: str, check: str | None = None) -> str:
    code: ReasonCode = (
        "mocked-container-port" if label == "mocked-container-port" else "mocked-worker-loader"
    )
    where = f"Check {check} ran" if check else "The evidence was produced"
    return gate_reason(code, f"{where} on a mock ({label}); only real evidence passes.")


def _definition_reasons(evidence: GateEvidence, record: ReceiptRecord) -> list[str]:
    definitions = evidence.definitions
    if definitions.error is not None:
        return [gate_reason("incomplete", f"The commit's checks are invalid: {definitions.error}")]
    if definitions.absent or not definitions.checks:
        return [gate_reason("incomplete", "The commit declares no checks.")]
    ordered = in_run_order(definitions.checks)
    declared = [definition.name for definition in ordered]
    recorded = [check.name for check in record.checks]
    if declared != recorded:
        return [
            gate_reason(
                "incomplete",
                f"The record covers checks {recorded}, but the commit declares {declared}.",
            )
        ]
    reasons: list[str] = []
    for definition, check in zip(ordered, record.checks, strict=True):
        reasons += _check_reasons(evidence, definition, check)
    return reasons


def _check_reasons(evidence: GateEvidence, definition: CheckDef, check: CheckRecord) -> list[str]:
    name = definition.name
    reasons: list[str] = []
    if check.definition != definition.definition():
        reasons.append(gate_reason("altered", f"Check {name}'s recorded definition differs."))
    # An absent runtime is accepted only on legacy full/container records.
    legacy = definition.tier == "full" and check.runtime is None
    if check.tier != definition.tier or not (
        legacy or check.runtime == RUNTIME_OF_TIER[definition.tier]
    ):
        reasons.append(gate_reason("altered", f"Check {name} ran in the wrong runtime."))
    if isinstance(definition, QuickCheckDef):
        reasons += _module_reasons(evidence, definition, check.image_digest)
    elif PINNED_PREFIX not in check.image_digest:
        reasons.append(gate_reason("incomplete", f"Check {name} names no pinned image."))
    return reasons


def _module_reasons(evidence: GateEvidence, definition: QuickCheckDef, recorded: str) -> list[str]:
    source = evidence.module_sources.get(definition.module)
    if source is None:
        return [
            gate_reason("incomplete", f"Check {definition.name}'s module could not be read again.")
        ]
    if quick_module_digest(source) != recorded:
        return [
            gate_reason(
                "altered",
                f"Check {definition.name}'s module source digest does not match the commit.",
            )
        ]
    return []
