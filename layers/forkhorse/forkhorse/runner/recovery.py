"""Recovery: runs whose execution died become infrastructure errors, and what they left goes.

Locally, the supervisor recovers at start: besides turning interrupted runs into
infrastructure errors and destroying orphan containers, it removes the checkouts a killed
run exported under `<home>/checkouts/` (`remove_stale_exports`).

On AWS, two triggers call this: an EventBridge rule on the state machines' execution status
changes, and a scheduled sweeper that catches anything the rule missed and destroys orphan
tasks. The rule also sees PromoteRun executions that died without reaching their Settle
state: their promotions are settled as a killed local workflow's are (`settle_stopped`).
All are idempotent: finalizing applies only while that generation is current and still
running, so it never touches a newer execution, and a settled promotion stays settled.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forkhorse.domain.run import RunRef
from forkhorse.ports.git import PackCollector
from forkhorse.runner.collector import DEFAULT_GRACE, collect
from forkhorse.runner.promote_steps import PromoteDeps, settle_stopped
from forkhorse.runner.steps import EXPORT_PREFIX, RunnerDeps, finalize

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient
    from mypy_boto3_stepfunctions.literals import ExecutionStatusType as ExecutionStatus
else:
    ExecutionStatus = str

INTERRUPTED: tuple[ExecutionStatus, ...] = ("FAILED", "TIMED_OUT", "ABORTED")
SWEEP_PAGE = 100


def finalize_interrupted(deps: RunnerDeps, execution_input: str) -> bool:
    """Mark the execution's run as an infrastructure error; False when it was not running."""
    run = RunRef.model_validate(json.loads(execution_input)["run"])
    review = deps.store.get_review(run.review_id)
    execution = None if review is None else review.execution
    if execution is None or execution.generation != run.generation or not execution.is_running:
        return False
    finalize(deps, {"run": run.model_dump(mode="json"), "infrastructureError": True})
    return True


def on_status_change(deps: RunnerDeps, event: dict[str, Any]) -> dict[str, Any]:
    """EventBridge `Step Functions Execution Status Change` of a ReceiptRun."""
    detail = event["detail"]
    if detail["status"] not in INTERRUPTED:
        return {"finalized": False}
    return {"finalized": finalize_interrupted(deps, detail["input"])}


def is_promote(event: dict[str, Any]) -> bool:
    """A PromoteRun's input names its promotion (a ReceiptRun's names its run)."""
    return "promotionId" in json.loads(event["detail"]["input"])


def on_promote_status_change(deps: PromoteDeps, event: dict[str, Any]) -> dict[str, Any]:
    """A PromoteRun that ended FAILED, TIMED_OUT or ABORTED ran no Settle state: settle its
    promotion by the same rules as a killed local workflow and free its lease."""
    detail = event["detail"]
    if detail["status"] not in INTERRUPTED:
        return {"promotion": None}
    ids = json.loads(detail["input"])
    return {"promotion": settle_stopped(deps, ids["projectId"], ids["promotionId"])}


def sweep(deps: RunnerDeps, sfn: SFNClient, state_machine_arn: str) -> dict[str, Any]:
    """Finalize recently interrupted executions and destroy tasks of dead executions."""
    finalized = 0
    for status in INTERRUPTED:
        listed = sfn.list_executions(
            stateMachineArn=state_machine_arn, statusFilter=status, maxResults=SWEEP_PAGE
        )
        for execution in listed["executions"]:
            described = sfn.describe_execution(executionArn=execution["executionArn"])
            finalized += finalize_interrupted(deps, described.get("input", "{}"))
    running = sfn.list_executions(
        stateMachineArn=state_machine_arn, statusFilter="RUNNING", maxResults=1000
    )
    live = frozenset(execution["name"] for execution in running["executions"])
    removed = deps.containers.cleanup_orphans(live)
    return {"finalized": finalized, "orphansRemoved": len(removed)}


def collect_garbage(
    deps: RunnerDeps, packs: PackCollector | None, grace: timedelta = DEFAULT_GRACE
) -> dict[str, Any]:
    """For the scheduled sweeper (not called by `sweep`: it scans the table and walks every
    project's history, so it belongs on a slower schedule than the 5-minute sweep)."""
    collection = collect(deps.store, deps.clock.now(), grace, packs=packs)
    return {
        "records": len(collection.records),
        "orphans": len(collection.orphans),
        "packs": sum(len(names) for names in collection.packs.values()),
    }


def remove_stale_exports(checkouts: Path, live: frozenset[str]) -> list[Path]:
    """Remove exported checkouts (`<execution>/<tree>`) of executions not in `live`.

    A partial export does not name its execution, so partials go only when nothing is live.
    """
    if not checkouts.is_dir():
        return []
    stale = [
        entry
        for entry in sorted(checkouts.iterdir())
        if (not live if entry.name.startswith(EXPORT_PREFIX) else entry.name not in live)
    ]
    for entry in stale:
        shutil.rmtree(entry, ignore_errors=True)
    return stale
