"""The steps of one receipt run: prepare, quick, full-start, full-poll, finalize.

Each step takes and returns its contract (`runner/workflow/contracts.py`), whose wire
form is exactly what the ReceiptRun state machine passes between its states, so the same
functions run behind Step Functions (one Lambda each) and in the local supervisor. Check
evidence travels between steps as content-addressed records in the Store: only digests go
through the state machine, which keeps payloads small.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forkhorse import observability, records
from forkhorse.attest.attestor import Attestor
from forkhorse.domain.checks import (
    CHECKS_PATH,
    FullCheckDef,
    InvalidChecksConfig,
    QuickCheckDef,
    parse_checks,
)
from forkhorse.domain.logs import EMPTY_LOG, BoundedLog
from forkhorse.domain.receipts import (
    CheckRecord,
    FinalOutcome,
    Outcome,
    ReceiptRecord,
    ReceiptSummary,
    SummaryCheck,
    format_timestamp,
    infrastructure_row,
    parse_timestamp,
    quick_not_run,
)
from forkhorse.domain.run import (
    INFRASTRUCTURE_MESSAGE,
    RunRef,
    evidence_of,
    platform_of,
    quick_gate_open,
    run_status,
    running_checks,
    skipped_full_check,
)
from forkhorse.domain.snapshot import (
    ExportLimitExceeded,
    ExportTimedOut,
    SnapshotBudget,
    SnapshotError,
)
from forkhorse.ports.clock import Clock
from forkhorse.ports.containers import (
    ContainerError,
    ContainerPort,
    ContainerSpec,
    LaunchThrottled,
)
from forkhorse.ports.evidence import EvidenceDrop
from forkhorse.ports.git import ArchiveLink, GitHost, Snapshot
from forkhorse.ports.sandbox import QuickSandbox
from forkhorse.ports.store import Store
from forkhorse.runner.workflow.contracts import (
    ExecutionInput,
    ExecutionState,
    Finalized,
    FullItem,
    FullProgress,
    Prepared,
    PreparedAbsent,
    PreparedChecks,
    PreparedInvalid,
    QuickDropped,
    QuickItem,
    StepResult,
)
from forkhorse.service.log_events import GateLog

log = logging.getLogger(__name__)

CONFIG_CHECK_NAME = CHECKS_PATH
ATTACH_CHECK_NAME = "receipt attach"
UNATTACHED_MESSAGE = (
    "The packet's claim was not live when the receipt finished, so the record was not "
    "attached; claim the packet and request the review again."
)
UNREADABLE_CONFIG = f"{CHECKS_PATH} could not be read from the reviewed commit."
SNAPSHOT_UNAVAILABLE = "The snapshot could not be opened."
EXPORT_PREFIX = ".export-"  # a partial checkout under the checkouts directory


@dataclass(frozen=True)
class QuickDeps:
    """All a quick check's host may touch: the sandbox, the snapshot and the evidence drop."""

    sandbox: QuickSandbox
    git: GitHost
    evidence: EvidenceDrop


@dataclass(frozen=True)
class RunnerDeps:
    """The ports of the trusted steps; handlers and the local supervisor build it."""

    store: Store
    git: GitHost
    containers: ContainerPort
    evidence: EvidenceDrop
    clock: Clock
    # Full checks see the exact checkout: a host directory (podman) or an archive link
    # (Fargate), made by (run, snapshot, deadline); the deadline is a `time.monotonic`
    # reading, the end of the check's own timeout.
    checkout_source: CheckoutSource[Path | ArchiveLink]
    # Signs each record's statement before it attaches (Invariant 10: the only key holder).
    attestor: Attestor | None = None
    # Appends each signed receipt to the transparency log (nothing where none is configured).
    gate_log: GateLog = field(default_factory=GateLog)


type CheckoutSource[T] = Callable[[RunRef, Snapshot, float], T]


def exported_checkout(workdir: Path) -> CheckoutSource[Path]:
    """A checkout source that exports the exact tree once per execution under `workdir`.

    The export is bounded by `ExportLimits` and the deadline; a refused or interrupted
    export removes its partial directory before the error goes on.
    """

    def source(run: RunRef, snapshot: Snapshot, deadline: float) -> Path:
        target = workdir / run.generation / snapshot.tree
        if not target.exists():
            partial = Path(tempfile.mkdtemp(dir=workdir, prefix=EXPORT_PREFIX))
            try:
                snapshot.export_to(partial, deadline)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            # Root-only: the export may be handed to the checks' user (podman's workspace.py).
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            partial.rename(target)
        return target

    return source


def discard_checkouts(workdir: Path, execution: str) -> None:
    shutil.rmtree(workdir / execution, ignore_errors=True)


def published_archive(git: GitHost) -> CheckoutSource[ArchiveLink]:
    """A checkout source for AWS: a 180-second link to the exact tree's archive."""

    def source(run: RunRef, snapshot: Snapshot, deadline: float) -> ArchiveLink:
        return git.store(run.project_id).publish_archive(snapshot.commit, deadline)

    return source


# --- summaries ---------------------------------------------------------------------------


def _current_summary(deps: RunnerDeps, run: RunRef) -> ReceiptSummary | None:
    review = deps.store.get_review(run.review_id)
    execution = None if review is None else review.execution
    if execution is None or execution.generation != run.generation:
        return None
    return execution.summary


def _publish_checks(deps: RunnerDeps, run: RunRef, checks: Sequence[SummaryCheck]) -> None:
    """Show progress on /state; a stale generation's update is refused by the Store."""
    summary = _current_summary(deps, run)
    if summary is None or summary.status != "running":
        return
    deps.store.update_summary(
        run.review_id, run.generation, summary.model_copy(update={"checks": list(checks)})
    )


def _publish_check_result(deps: RunnerDeps, run: RunRef, record: CheckRecord) -> None:
    summary = _current_summary(deps, run)
    if summary is None:
        return
    rows = [record.summary() if row.name == record.name else row for row in summary.checks]
    _publish_checks(deps, run, rows)


def _finished_summary(
    deps: RunnerDeps, run: RunRef, status: FinalOutcome, checks: Sequence[SummaryCheck]
) -> ReceiptSummary | None:
    summary = _current_summary(deps, run)
    if summary is None:
        return None
    finished = deps.clock.now()
    started = parse_timestamp(summary.started_at)
    elapsed = max(0, int((finished - started).total_seconds() * 1000))
    final = summary.model_copy(
        update={
            "status": status,
            "finished_at": format_timestamp(finished),
            "duration_ms": elapsed,
            "checks": list(checks),
        }
    )
    observability.run_finished(final)
    return final


# --- prepare ----------------------------------------------------------------------------


def _open_snapshot(deps: RunnerDeps, run: RunRef) -> Snapshot:
    return deps.git.store(run.project_id).open_snapshot(run.commit)


def prepare(deps: RunnerDeps, event: ExecutionInput) -> Prepared:
    """Resolve the exact commit's check definitions and show them as running."""
    run = event.run
    snapshot = _open_snapshot(deps, run)
    try:
        text = snapshot.reader(SnapshotBudget()).read(CHECKS_PATH)
    except SnapshotError:
        return _invalid(UNREADABLE_CONFIG)
    if text is None:
        return PreparedAbsent(discovery="absent", quick=[], full=[], quick_count=0)
    try:
        definitions = parse_checks(text)
    except InvalidChecksConfig as invalid:
        return _invalid(invalid.message)
    _publish_checks(deps, run, running_checks([d.definition() for d in definitions]))
    quick = [d for d in definitions if isinstance(d, QuickCheckDef)]
    return PreparedChecks(
        discovery="checks",
        tree=snapshot.tree,
        quick=quick,
        full=[d for d in definitions if isinstance(d, FullCheckDef)],
        quick_count=len(quick),
    )


def _invalid(message: str) -> PreparedInvalid:
    return PreparedInvalid(discovery="invalid", message=message, quick=[], full=[], quick_count=0)


# --- quick ------------------------------------------------------------------------------


def quick(deps: QuickDeps, event: QuickItem) -> QuickDropped:
    """Run one quick check in a fresh sandbox and drop its evidence for `quick_record`.

    On AWS this is the only step inside the isolated quick-check Lambda: it reads the
    snapshot and writes the drop, and touches nothing else.
    """
    run, definition = event.run, event.check
    try:
        snapshot = deps.git.store(run.project_id).open_snapshot(run.commit)
    except Exception:  # a missing object, an unsafe tree or storage trouble: fail closed
        log.exception("quick check %s: the snapshot could not be opened", definition.name)
        record = unopened_snapshot_record(definition, deps.sandbox.platform)
    else:
        record = deps.sandbox.run_check(snapshot, definition)
    return QuickDropped(run=run, name=record.name, evidence=deps.evidence.put(record))


def unopened_snapshot_record(definition: QuickCheckDef, platform: str) -> CheckRecord:
    return quick_not_run(definition, platform, SNAPSHOT_UNAVAILABLE)


def quick_record(deps: RunnerDeps, event: QuickDropped) -> StepResult:
    """Move a quick check's dropped evidence into the Store and show it on /state."""
    record = deps.evidence.take(event.evidence)
    if record.name != event.name or record.tier != "quick":
        raise LookupError("the dropped evidence is not this quick check's")
    _publish_check_result(deps, event.run, record)
    return _step_result(deps, record)


def _step_result(deps: RunnerDeps, record: CheckRecord) -> StepResult:
    digest = records.put_json(deps.store, record.model_dump(mode="json"), deps.clock.now())
    return StepResult(
        name=record.name,
        outcome=_final(record.outcome),
        passed=record.outcome == "passed",
        result=digest,
    )


def _final(outcome: Outcome) -> FinalOutcome:
    if outcome == "running":
        raise ValueError("a check's stored evidence is never still running")
    return outcome


# --- full -------------------------------------------------------------------------------


def _container_record(
    deps: RunnerDeps,
    definition: FullCheckDef,
    image_digest: str,
    outcome: FinalOutcome,
    message: str,
    duration_ms: int | None,
    stdout: BoundedLog = EMPTY_LOG,
    stderr: BoundedLog = EMPTY_LOG,
) -> CheckRecord:
    return CheckRecord(
        name=definition.name,
        tier="full",
        definition=definition.definition(),
        runtime="container",
        platform=deps.containers.platform,
        image_digest=image_digest,
        outcome=outcome,
        message=message,
        duration_ms=duration_ms,
        stdout=stdout,
        stderr=stderr,
    )


def _finished_full(deps: RunnerDeps, event: FullItem, record: CheckRecord) -> FullProgress:
    _publish_check_result(deps, event.run, record)
    result = _step_result(deps, record)
    return FullProgress(
        run=event.run,
        check=event.check,
        done=True,
        name=result.name,
        outcome=result.outcome,
        passed=result.passed,
        result=result.result,
    )


def full_start(deps: RunnerDeps, event: FullItem) -> FullProgress:
    """Resolve the pinned image, then start the container on the exact checkout."""
    run, definition = event.run, event.check
    started = time.monotonic()
    deadline = started + definition.timeout_seconds  # the export runs inside the timeout
    try:
        image_ref = deps.containers.preflight(definition.image)
        source = deps.checkout_source(run, _open_snapshot(deps, run), deadline)
        handle = deps.containers.start(
            ContainerSpec(
                project=run.project_id,
                execution=run.generation,
                generation=run.generation,
                check=definition.name,
                image_ref=image_ref,
                run=definition.run,
                timeout_seconds=_seconds_left(deadline),
                source=source,
            )
        )
    except LaunchThrottled:
        raise  # nothing started: the state machine's Retry on FullStart tries again later
    except ContainerError as error:
        record = _container_record(deps, definition, "", "infrastructure-error", str(error), None)
        return _finished_full(deps, event, record)
    except SnapshotError as refused:
        record = _unexported_record(deps, definition, refused, started)
        return _finished_full(deps, event, record)
    return FullProgress(run=run, check=definition, done=False, handle=handle)


def _seconds_left(deadline: float) -> int:
    """What remains of the check's timeout for the container, in whole seconds (at least 1)."""
    return max(1, math.ceil(deadline - time.monotonic()))


def _unexported_record(
    deps: RunnerDeps, definition: FullCheckDef, error: SnapshotError, started: float
) -> CheckRecord:
    """No container started: the checkout was too large, too slow to export, or unsafe."""
    elapsed = int((time.monotonic() - started) * 1000)
    if isinstance(error, ExportTimedOut):
        message = f"Timed out after {definition.timeout_seconds:g} s while exporting the checkout."
        return _container_record(deps, definition, "", "timed-out", message, elapsed)
    if isinstance(error, ExportLimitExceeded):
        return _container_record(deps, definition, "", "failed", error.message, elapsed)
    return _container_record(deps, definition, "", "infrastructure-error", error.message, None)


def full_poll(deps: RunnerDeps, event: FullProgress) -> FullProgress:
    """While running, report not done; once ended, collect, destroy and store the evidence."""
    handle = event.handle
    if event.done or handle is None:
        raise ValueError("full_poll polls a started container that has not finished")
    if deps.containers.poll(handle) == "running":
        return event
    definition = event.check
    try:
        result = deps.containers.collect(handle)
    finally:
        deps.containers.destroy(handle)  # raises CleanupUnconfirmed: the run fails closed
    record = _container_record(
        deps,
        definition,
        handle.image_ref,
        result.outcome,
        result.message,
        result.duration_ms,
        result.stdout,
        result.stderr,
    )
    return _finished_full(deps, FullItem(run=event.run, check=definition), record)


# --- finalize ---------------------------------------------------------------------------


def finalize(deps: RunnerDeps, event: ExecutionState) -> Finalized:
    """Publish the record, chunks then manifest, and attach it by compare-and-set."""
    run, prepared = event.run, event.prepared
    if event.infrastructure_error or prepared is None:
        return _finalize_infrastructure_error(deps, run)
    if isinstance(prepared, PreparedAbsent):
        return _discard(deps, run)
    if isinstance(prepared, PreparedInvalid):
        return _finalize_invalid(deps, run, prepared.message)
    check_records = _collect_records(deps, prepared, event)
    return _publish(deps, run, prepared, check_records)


def _discard(deps: RunnerDeps, run: RunRef) -> Finalized:
    """No `.forkhorse/checks`: the review reads `receipt: null` once discovery is done."""
    discarded = deps.store.discard_execution(run.review_id, run.generation)
    return Finalized(attached=False, discovery="absent", discarded=discarded)


def _load_record(deps: RunnerDeps, digest: str) -> CheckRecord:
    value = records.get_json(deps.store, digest)
    if value is None:
        raise LookupError("a check's evidence is missing from the Store")
    return CheckRecord.model_validate(value)


def _collect_records(
    deps: RunnerDeps, prepared: PreparedChecks, event: ExecutionState
) -> list[CheckRecord]:
    quick_records = [_load_record(deps, item.result) for item in event.quick or []]
    if len(quick_records) != len(prepared.quick):
        raise LookupError("a quick check produced no evidence")
    if not quick_gate_open(quick_records):
        observability.quick_gate_refused()
        return quick_records + [skipped_full_check(d.definition()) for d in prepared.full]
    full_records = [_load_record(deps, item.result) for item in event.full or []]
    if len(full_records) != len(prepared.full):
        raise LookupError("a full check produced no evidence")
    return quick_records + full_records


def _publish(
    deps: RunnerDeps, run: RunRef, prepared: PreparedChecks, checks: list[CheckRecord]
) -> Finalized:
    status = run_status(checks)
    final = _finished_summary(deps, run, status, [c.summary() for c in checks])
    if final is None:
        return Finalized(attached=False, reason="stale generation")
    record = ReceiptRecord(
        project=run.project_id,
        review_id=run.review_id,
        commit=run.commit,
        tree=prepared.tree,
        generation=run.generation,
        trigger=run.trigger,
        status=status,
        evidence=evidence_of(checks),
        platform=platform_of(checks),
        started_at=final.started_at,
        finished_at=final.finished_at or final.started_at,
        duration_ms=final.duration_ms,
        checks=checks,
    )
    digest = records.put_record(deps.store, record, deps.clock.now())
    if deps.attestor is not None:
        intend = deps.gate_log.intending_receipt(record, digest)
        deps.attestor.attest_receipt(record, digest, deps.clock.now(), intend)
    deps.gate_log.receipt(record, digest)
    attached = deps.store.attach(
        run.review_id,
        run.commit,
        run.generation,
        run.trigger,
        digest,
        final.model_copy(update={"digest": digest}),
        deps.clock.now(),
    )
    if not attached:
        _publish_unattached(deps, run, final)
    return Finalized(attached=attached, digest=digest, status=status)


def _publish_unattached(deps: RunnerDeps, run: RunRef, final: ReceiptSummary) -> None:
    """Attach refused (the claim lapsed): the record exists but is no evidence for this
    review, so the run must not read as passed with a null digest; it says why instead."""
    row = infrastructure_row(ATTACH_CHECK_NAME, UNATTACHED_MESSAGE)
    unattached = final.model_copy(
        update={"status": "infrastructure-error", "checks": [*final.checks, row]}
    )
    deps.store.update_summary(run.review_id, run.generation, unattached)


def _finalize_invalid(deps: RunnerDeps, run: RunRef, message: str) -> Finalized:
    return finalize_refused(deps, run, CONFIG_CHECK_NAME, message)


def finalize_refused(deps: RunnerDeps, run: RunRef, name: str, message: str) -> Finalized:
    """End a run before any check ran, as an infrastructure error with one row saying why."""
    row = infrastructure_row(name, message)
    final = _finished_summary(deps, run, "infrastructure-error", [row])
    if final is not None:
        deps.store.update_summary(run.review_id, run.generation, final)
    return Finalized(attached=False, status="infrastructure-error")


def _finalize_infrastructure_error(deps: RunnerDeps, run: RunRef) -> Finalized:
    """The catch-all: a static message, no digest, every unfinished check marked."""
    summary = _current_summary(deps, run)
    if summary is None:
        return Finalized(attached=False, status="infrastructure-error")
    if summary.status != "running":  # it ended after all: its attach landed, then failed
        return Finalized(attached=summary.digest is not None, status=_final(summary.status))
    rows = [_failed_row(row) for row in summary.checks]
    final = _finished_summary(deps, run, "infrastructure-error", rows)
    if final is not None:
        deps.store.update_summary(run.review_id, run.generation, final)
    return Finalized(attached=False, status="infrastructure-error")


def _failed_row(row: SummaryCheck) -> SummaryCheck:
    if row.outcome != "running":
        return row
    return row.model_copy(
        update={"outcome": "infrastructure-error", "message": INFRASTRUCTURE_MESSAGE}
    )
