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
from pathlib import Path
from typing import Any

from forkhorse.ports.orchestrator import ExecutionEnded, ExecutionSweep
from forkhorse.runner.workflow.contracts import ExecutionInput, ExecutionState
from forkhorse.runner.workflow.steps import EXPORT_PREFIX, RunnerDeps, finalize
from forkhorse.service.promote.contracts import PromoteStart
from forkhorse.service.promote.steps import PromoteDeps, settle_stopped


def finalize_interrupted(deps: RunnerDeps, execution_input: str) -> bool:
    """Mark the execution's run as an infrastructure error; False when it was not running."""
    run = ExecutionInput.model_validate_json(execution_input).run
    review = deps.store.get_review(run.review_id)
    execution = None if review is None else review.execution
    if execution is None or execution.generation != run.generation or not execution.is_running:
        return False
    finalize(deps, ExecutionState(run=run, infrastructure_error=True))
    return True


def on_status_change(deps: RunnerDeps, ended: ExecutionEnded) -> dict[str, Any]:
    """A ReceiptRun's `Step Functions Execution Status Change`."""
    if not ended.interrupted:
        return {"finalized": False}
    return {"finalized": finalize_interrupted(deps, ended.input)}


def is_promote(ended: ExecutionEnded) -> bool:
    """A PromoteRun's input names its promotion (a ReceiptRun's names its run)."""
    return "promotionId" in json.loads(ended.input)


def on_promote_status_change(deps: PromoteDeps, ended: ExecutionEnded) -> dict[str, Any]:
    """A PromoteRun that ended FAILED, TIMED_OUT or ABORTED ran no Settle state: settle its
    promotion by the same rules as a killed local workflow and free its lease."""
    if not ended.interrupted:
        return {"promotion": None}
    ids = PromoteStart.model_validate_json(ended.input)
    return {"promotion": settle_stopped(deps, ids.project_id, ids.promotion_id)}


def settle_interrupted_promotes(deps: PromoteDeps, executions: ExecutionSweep) -> int:
    """Settle the promotions of interrupted PromoteRun executions still open; how many."""
    settled = 0
    for execution_input in executions.interrupted_inputs("promote"):
        ids = PromoteStart.model_validate_json(execution_input)
        promotion = deps.store.get_promotion(ids.project_id, ids.promotion_id)
        if promotion is None or promotion.settled_at is not None:
            continue
        settled += settle_stopped(deps, promotion.project_id, promotion.id) in ("done", "failed")
    return settled


def sweep(
    deps: RunnerDeps, executions: ExecutionSweep, promotes: PromoteDeps | None = None
) -> dict[str, Any]:
    """Finalize recently interrupted ReceiptRuns, settle interrupted PromoteRuns' promotions
    (with `promotes`, their ports) and destroy tasks of dead executions."""
    finalized = sum(
        finalize_interrupted(deps, execution_input)
        for execution_input in executions.interrupted_inputs("receipt")
    )
    settled = 0 if promotes is None else settle_interrupted_promotes(promotes, executions)
    removed = deps.containers.cleanup_orphans(executions.running_runs())
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
