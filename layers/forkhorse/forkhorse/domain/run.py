"""Pure decisions of one receipt run: the quick gate, skipped full checks, evidence, status."""

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from forkhorse.domain.receipts import (
    SKIPPED_FULL_MESSAGE,
    CheckRecord,
    Evidence,
    FinalOutcome,
    SummaryCheck,
    Trigger,
)
from forkhorse.domain.wire import WIRE_CONFIG

MOCK_PLATFORM = "mock"
MOCK_EVIDENCE_OF_TIER: dict[str, Evidence] = {
    "quick": "mocked-worker-loader",
    "full": "mocked-container-port",
}
INFRASTRUCTURE_MESSAGE = "Infrastructure failed before the check could finish."


class RunRef(BaseModel):
    """Which execution a step works for. Only the service creates one: never client input."""

    model_config = WIRE_CONFIG

    project_id: str
    review_id: str
    generation: str
    trigger: Trigger
    commit: str


# Worst first: the run's status is the worst of its checks' outcomes.
_SEVERITY: dict[FinalOutcome, int] = {
    "passed": 0,
    "failed": 1,
    "timed-out": 2,
    "infrastructure-error": 3,
}


def quick_gate_open(quick: Sequence[CheckRecord]) -> bool:
    """Full checks may start only when every quick check passed."""
    return all(record.outcome == "passed" for record in quick)


def skipped_full_check(definition: dict[str, Any]) -> CheckRecord:
    """The exact record of a full check that never started because a quick check failed."""
    return CheckRecord(
        name=str(definition["name"]),
        tier="full",
        definition=definition,
        runtime="container",
        platform="",
        image_digest="",
        outcome="failed",
        message=SKIPPED_FULL_MESSAGE,
        duration_ms=None,
    )


def run_status(records: Sequence[CheckRecord]) -> FinalOutcome:
    """The worst outcome among the checks; a run without checks cannot pass."""
    if not records:
        return "infrastructure-error"
    outcomes: list[FinalOutcome] = []
    for record in records:
        if record.outcome == "running":
            return "infrastructure-error"
        outcomes.append(record.outcome)
    return max(outcomes, key=_SEVERITY.__getitem__)


def _ran(record: CheckRecord) -> bool:
    return not (record.tier == "full" and record.message == SKIPPED_FULL_MESSAGE)


def evidence_of(records: Sequence[CheckRecord]) -> Evidence:
    """What actually produced the evidence. Any mocked port keeps its mocked label."""
    ran = [record for record in records if _ran(record)]
    for tier in ("full", "quick"):
        if any(r.tier == tier and r.platform == MOCK_PLATFORM for r in ran):
            return MOCK_EVIDENCE_OF_TIER[tier]
    tiers = {record.tier for record in ran}
    if tiers == {"quick", "full"}:
        return "mixed"
    if tiers == {"full"}:
        return "container"
    return "dynamic-worker"


def platform_of(records: Sequence[CheckRecord]) -> str:
    """The platforms that ran checks, in first-seen order, joined with '+'."""
    seen: list[str] = []
    for record in records:
        if _ran(record) and record.platform and record.platform not in seen:
            seen.append(record.platform)
    return "+".join(seen)


def running_checks(definitions: Sequence[dict[str, Any]]) -> list[SummaryCheck]:
    """The summary rows shown while the checks run, in definition order."""
    return [
        SummaryCheck(
            name=str(definition["name"]),
            tier=definition["tier"],
            runtime="dynamic-worker" if definition["tier"] == "quick" else "container",
            outcome="running",
            duration_ms=None,
        )
        for definition in definitions
    ]
