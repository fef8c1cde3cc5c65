"""Receipts: the fixed summary wire shape and the immutable record (schema 1).

The summary is what `/state` shows for a review's current execution. The record
is the attached, content-addressed evidence; its canonical bytes are what the
digest covers (see `forkhorse.domain.canonical`).
"""

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, Field, NonNegativeInt, model_validator

from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.logs import EMPTY_LOG, BoundedLog
from forkhorse.domain.wire import WIRE_CONFIG, is_none

Outcome = Literal["running", "passed", "failed", "infrastructure-error", "timed-out"]
FinalOutcome = Literal["passed", "failed", "infrastructure-error", "timed-out"]
Tier = Literal["quick", "full"]
Runtime = Literal["dynamic-worker", "container"]
Trigger = Literal["review-created", "before-promote"]
Evidence = Literal[
    "dynamic-worker", "container", "mixed", "mocked-worker-loader", "mocked-container-port"
]
MOCKED_EVIDENCE: frozenset[Evidence] = frozenset({"mocked-worker-loader", "mocked-container-port"})
RUNTIME_OF_TIER: dict[Tier, Runtime] = {"quick": "dynamic-worker", "full": "container"}
SKIPPED_FULL_MESSAGE = "Skipped: a quick check failed."

_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$")
_QUICK_IMAGE_DIGEST = re.compile(r"^module:sha256:[0-9a-f]{64}$")


def _check_timestamp(value: str) -> str:
    if not _TIMESTAMP.fullmatch(value):
        raise ValueError("timestamp must be ISO 8601 UTC, like 2026-01-02T03:04:05.678Z")
    return value


Timestamp = Annotated[str, AfterValidator(_check_timestamp)]


def format_timestamp(moment: datetime) -> str:
    """The wire form of a moment: ISO 8601 UTC with milliseconds, as JavaScript writes it."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: str) -> datetime:
    return datetime.fromisoformat(_check_timestamp(value))


class _Wire(BaseModel):
    """Strict camelCase models: unknown fields are refused, nothing is coerced."""

    model_config = WIRE_CONFIG


class SummaryCheck(_Wire):
    name: str
    tier: Tier
    runtime: Runtime | None = Field(default=None, exclude_if=is_none)
    message: str | None = Field(default=None, exclude_if=is_none)
    outcome: Outcome
    duration_ms: NonNegativeInt | None


class ReceiptSummary(_Wire):
    """The spec's "Fixed state wire contract": exactly these fields, nothing more."""

    status: Outcome
    trigger: Trigger
    digest: str | None
    started_at: Timestamp
    finished_at: Timestamp | None
    duration_ms: NonNegativeInt | None
    checks: list[SummaryCheck]


def summary_json(summary: ReceiptSummary) -> dict[str, Any]:
    """The exact wire dict: optional `runtime`/`message` omitted, nullable fields kept as null."""
    return summary.model_dump(mode="json", by_alias=True)


def running_summary(trigger: Trigger, started_at: datetime) -> ReceiptSummary:
    """A fresh execution's summary: running, no digest, checks empty while definitions load."""
    return ReceiptSummary(
        status="running",
        trigger=trigger,
        digest=None,
        started_at=format_timestamp(started_at),
        finished_at=None,
        duration_ms=None,
        checks=[],
    )


class CheckRecord(_Wire):
    """One check's evidence inside a record.

    `runtime` is absent only in legacy full/container records, whose original
    serialization (and so their digest) never had the field.
    """

    name: str
    tier: Tier
    definition: dict[str, Any]
    runtime: Runtime | None = Field(default=None, exclude_if=is_none)
    platform: str
    image_digest: str
    outcome: Outcome
    message: str
    duration_ms: NonNegativeInt | None
    stdout: BoundedLog = EMPTY_LOG
    stderr: BoundedLog = EMPTY_LOG

    @model_validator(mode="after")
    def _runtime_matches_tier(self) -> Self:
        if self.runtime is None and self.tier != "full":
            raise ValueError("a check without runtime must be a legacy full/container check")
        if self.runtime is not None and self.runtime != RUNTIME_OF_TIER[self.tier]:
            raise ValueError(f"a {self.tier} check runs in {RUNTIME_OF_TIER[self.tier]}")
        if (
            self.tier == "quick"
            and self.image_digest
            and not _QUICK_IMAGE_DIGEST.match(self.image_digest)
        ):
            raise ValueError("a quick check's image digest is module:sha256:<hex> or empty")
        return self

    def summary(self) -> SummaryCheck:
        return SummaryCheck(
            name=self.name,
            tier=self.tier,
            runtime=self.runtime,
            message=self.message or None,
            outcome=self.outcome,
            duration_ms=self.duration_ms,
        )


class ReceiptRecord(_Wire):
    """The attached immutable evidence of one finished execution (schema 1)."""

    schema_version: Literal[1] = Field(default=1, alias="schema")
    project: str
    review_id: str
    commit: str
    tree: str
    generation: str
    trigger: Trigger
    status: FinalOutcome
    evidence: Evidence
    platform: str
    started_at: Timestamp
    finished_at: Timestamp
    duration_ms: NonNegativeInt | None
    checks: list[CheckRecord]

    @model_validator(mode="after")
    def _checks_are_finished(self) -> Self:
        if any(check.outcome == "running" for check in self.checks):
            raise ValueError("a record holds only finished checks")
        return self

    def summary(self, digest: str | None) -> ReceiptSummary:
        """The wire summary of this record, attached under `digest` (None when unattached)."""
        return ReceiptSummary(
            status=self.status,
            trigger=self.trigger,
            digest=digest,
            started_at=self.started_at,
            finished_at=self.finished_at,
            duration_ms=self.duration_ms,
            checks=[check.summary() for check in self.checks],
        )


def quick_not_run(definition: QuickCheckDef, platform: str, message: str) -> CheckRecord:
    """A quick check that could not start (no snapshot, no runtime): no source, so it has no
    digest and cannot pass."""
    return CheckRecord(
        name=definition.name,
        tier="quick",
        definition=definition.definition(),
        runtime="dynamic-worker",
        platform=platform,
        image_digest="",
        outcome="infrastructure-error",
        message=message,
        duration_ms=None,
    )


def infrastructure_row(name: str, message: str) -> SummaryCheck:
    """A summary row that is not a check: it says why a run ended as an infrastructure error."""
    return SummaryCheck(
        name=name, tier="quick", message=message, outcome="infrastructure-error", duration_ms=None
    )


INTERRUPTED_CHECK_NAME = "receipt run"
INTERRUPTED = (
    "Interrupted: the receipt run stopped (a restart or a failed execution) before this "
    "finished; request the review again."
)


def interrupted_summary(
    summary: ReceiptSummary, now: datetime, message: str = INTERRUPTED
) -> ReceiptSummary:
    """What a restart (or a stop, with its own message) makes of a running summary: an
    infrastructure error, no digest, each unfinished check saying why (a row says so if
    none was running)."""
    started = parse_timestamp(summary.started_at)
    elapsed_ms = max(0, int((now - started).total_seconds() * 1000))
    checks = [
        check.model_copy(update={"outcome": "infrastructure-error", "message": message})
        if check.outcome == "running"
        else check
        for check in summary.checks
    ]
    if not any(check.outcome == "running" for check in summary.checks):
        checks.append(infrastructure_row(INTERRUPTED_CHECK_NAME, message))
    return summary.model_copy(
        update={
            "status": "infrastructure-error",
            "digest": None,
            "finished_at": format_timestamp(now),
            "duration_ms": elapsed_ms,
            "checks": checks,
        }
    )
