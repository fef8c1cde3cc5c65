"""Recovery: runs whose execution died become infrastructure errors, and what they left goes.

Locally, the supervisor recovers at start: besides turning interrupted runs into
infrastructure errors and destroying orphan containers, it removes the checkouts a killed
run exported under `<home>/checkouts/` (`remove_stale_exports`).

On AWS, two triggers call this: an EventBridge rule on the state machines' execution status
changes, and a scheduled sweeper that catches anything the rule missed and destroys orphan
tasks. Both also see PromoteRun executions that died without reaching their Settle state:
their promotions are settled as a killed local workflow's are (`settle_stopped`).
All are idempotent: finalizing applies only while that generation is current and still
running, so it never touches a newer execution, and a settled promotion stays settled.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forkhorse.runner.workflow.contracts import ExecutionInput, ExecutionState
from forkhorse.runner.workflow.steps import EXPORT_PREFIX, RunnerDeps, finalize
from forkhorse.service.promote.contracts import PromoteStart
from forkhorse.service.promote.steps import PromoteDeps, settle_stopped

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient
    from mypy_boto3_stepfunctions.literals import ExecutionStatusType as ExecutionStatus
else:
    ExecutionStatus = str

INTERRUPTED: tuple[ExecutionStatus, ...] = ("FAILED", "TIMED_OUT", "ABORTED")
SWEEP_PAGE = 100


def finalize_interrupted(deps: RunnerDeps, execution_input: str) -> bool:
    """Mark the execution's run as an infrastructure error; False when it was not running."""
    run = ExecutionInput.model_validate_json(execution_input).run
    review = deps.store.get_review(run.review_id)
    execution = None if review is None else review.execution
    if execution is None or execution.generation != run.generation or not execution.is_running:
        return False
    finalize(deps, ExecutionState(run=run, infrastructure_error=True))
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
    ids = PromoteStart.model_validate_json(detail["input"])
    return {"promotion": settle_stopped(deps, ids.project_id, ids.promotion_id)}


def _interrupted_inputs(sfn: SFNClient, state_machine_arn: str) -> Iterator[str]:
    """The inputs of the machine's most recent FAILED, TIMED_OUT and ABORTED executions."""
    for status in INTERRUPTED:
        listed = sfn.list_executions(
            stateMachineArn=state_machine_arn, statusFilter=status, maxResults=SWEEP_PAGE
        )
        for execution in listed["executions"]:
            described = sfn.describe_execution(executionArn=execution["executionArn"])
            yield described.get("input", "{}")


def settle_interrupted_promotes(deps: PromoteDeps, sfn: SFNClient, machine_arn: str) -> int:
    """Settle the promotions of interrupted PromoteRun executions still open; how many."""
    settled = 0
    for execution_input in _interrupted_inputs(sfn, machine_arn):
        ids = PromoteStart.model_validate_json(execution_input)
        promotion = deps.store.get_promotion(ids.project_id, ids.promotion_id)
        if promotion is None or promotion.settled_at is not None:
            continue
        settled += settle_stopped(deps, promotion.project_id, promotion.id) in ("done", "failed")
    return settled


def sweep(
    deps: RunnerDeps,
    sfn: SFNClient,
    state_machine_arn: str,
    promotes: tuple[PromoteDeps, str] | None = None,
) -> dict[str, Any]:
    """Finalize recently interrupted ReceiptRuns, settle interrupted PromoteRuns' promotions
    (`promotes`: their ports and machine) and destroy tasks of dead executions."""
    finalized = sum(
        finalize_interrupted(deps, execution_input)
        for execution_input in _interrupted_inputs(sfn, state_machine_arn)
    )
    settled = 0 if promotes is None else settle_interrupted_promotes(promotes[0], sfn, promotes[1])
    running = sfn.list_executions(
        stateMachineArn=state_machine_arn, statusFilter="RUNNING", maxResults=1000
    )
    live = frozenset(execution["name"] for execution in running["executions"])
    removed = deps.containers.cleanup_orphans(live)
    return {"finalized": finalized, "promotionsSettled": settled, "orphansRemoved": len(removed)}


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
