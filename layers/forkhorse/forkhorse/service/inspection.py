"""Read-only owner views for the console: what the gate would decide now, and a run's history.

The gate view calls the same checks approve and promote run (nothing is re-decided here),
so the console can list each reason before the owner presses a button. The history view
asks the Orchestrator for the current execution's events, shaped like Step Functions'
GetExecutionHistory whether they come from the local supervisor or from AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from forkhorse.domain.model import Review
from forkhorse.domain.run import RunRef
from forkhorse.responses import (
    CheckDiffRow,
    GateChecks,
    GateView,
    HistoryView,
    PromoteHistory,
    Verdict,
)
from forkhorse.service.approvals import Approvals, checks_diff
from forkhorse.service.context import Context
from forkhorse.service.errors import Conflict
from forkhorse.service.identity import Caller
from forkhorse.service.promote.request import Promotions


@runtime_checkable
class NamesExecutions(Protocol):
    """An Orchestrator whose executions have ARNs (Step Functions)."""

    def execution_arn(self, run: RunRef) -> str: ...

    def promote_execution_arn(self, project_id: str, promotion_id: str) -> str: ...


def step_functions_console_url(execution_arn: str) -> str:
    """The execution's page in the AWS Step Functions console."""
    region = execution_arn.split(":")[3]
    return (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/v2/executions/details/{execution_arn}"
    )


def _console_url(arn: str | None) -> str | None:
    """An execution's page in the console; None locally (no ARN)."""
    return None if arn is None else step_functions_console_url(arn)


def _verdict(check: Callable[[], object]) -> Verdict:
    """Allowed, or each reason the call would be refused with."""
    try:
        check()
    except Conflict as refused:
        return Verdict(allowed=False, reasons=refused.reasons or [refused.message])
    return Verdict(allowed=True, reasons=[])


class Inspection:
    def __init__(self, context: Context, approvals: Approvals, promotions: Promotions) -> None:
        self._c = context
        self._approvals = approvals
        self._promotions = promotions

    def gate(self, caller: Caller, project_id: str, review_id: str) -> GateView:
        """Would approve and promote of the review's current commit be refused, and why."""
        project = self._c.owned_project(caller, project_id, "read the gate")
        review = self._c.visible_review(caller, project, review_id)
        required = project.effective_settings.require_receipt
        commit = review.commit
        diff = checks_diff(self._c, project.id, commit)
        return GateView(
            mode="required" if required else "advisory",
            commit=commit,
            approve=_verdict(lambda: self._approvals.check(project, review, commit)),
            promote=_verdict(lambda: self._promotions.preconditions(review, commit)),
            checks=GateChecks(
                policy=project.policy,
                # Whether removed or changed checks need the owner's acceptance now.
                enforced=project.protects_checks,
                canonical_head=self._c.repos(project.id).head(),
                diff=[CheckDiffRow.model_validate(row) for row in diff.to_json()],
            ),
        )

    def history(self, caller: Caller, project_id: str, review_id: str) -> HistoryView:
        """The current execution's events; none before the review's first run."""
        project = self._c.owned_project(caller, project_id, "read execution histories")
        review = self._c.visible_review(caller, project, review_id)
        orchestrator = self._c.orchestrator
        named = isinstance(orchestrator, NamesExecutions)
        run = _current_run(review)
        arn = None
        if isinstance(orchestrator, NamesExecutions) and run is not None:
            arn = orchestrator.execution_arn(run)
        return HistoryView(
            source="step-functions" if named else "local",
            execution_arn=arn,
            console_url=_console_url(arn),
            events=[] if run is None else orchestrator.history(run),
            promote=self._promote_history(review),
        )

    def _promote_history(self, review: Review) -> PromoteHistory | None:
        """The review's latest promote workflow, beside its receipt run; None before any."""
        latest = self._c.store.latest_promotion(review.project_id, review.id)
        if latest is None:
            return None
        orchestrator = self._c.orchestrator
        arn = None
        if isinstance(orchestrator, NamesExecutions):
            arn = orchestrator.promote_execution_arn(review.project_id, latest.id)
        events = orchestrator.promote_history(review.project_id, latest.id)
        return PromoteHistory(
            promotion_id=latest.id,
            state=latest.state,
            execution_arn=arn,
            console_url=_console_url(arn),
            events=events,
        )


def _current_run(review: Review) -> RunRef | None:
    execution = review.execution
    if execution is None:
        return None
    return RunRef(
        project_id=review.project_id,
        review_id=review.id,
        generation=execution.generation,
        trigger=execution.trigger,
        commit=execution.commit,
    )
