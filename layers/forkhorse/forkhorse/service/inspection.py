"""Read-only owner views for the console: what the gate would decide now, and a run's history.

The gate view calls the same checks approve and promote run (nothing is re-decided here),
so the console can list each reason before the owner presses a button. The history view
asks the Orchestrator for the current execution's events, shaped like Step Functions'
GetExecutionHistory whether they come from the local supervisor or from AWS.
"""

from __future__ import annotations

from collections.abc import Callable

from forkhorse.domain.model import Review
from forkhorse.domain.run import RunRef
from forkhorse.ports.orchestrator import ExecutionLink, NamesExecutions
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
        link = None
        if isinstance(orchestrator, NamesExecutions) and run is not None:
            link = orchestrator.run_execution(run)
        return HistoryView(
            source="step-functions" if named else "local",
            execution_arn=_arn(link),
            console_url=_console_url(link),
            events=[] if run is None else orchestrator.history(run),
            promote=self._promote_history(review),
        )

    def _promote_history(self, review: Review) -> PromoteHistory | None:
        """The review's latest promote workflow, beside its receipt run; None before any."""
        latest = self._c.store.latest_promotion(review.project_id, review.id)
        if latest is None:
            return None
        orchestrator = self._c.orchestrator
        link = None
        if isinstance(orchestrator, NamesExecutions):
            link = orchestrator.promote_execution(review.project_id, latest.id)
        events = orchestrator.promote_history(review.project_id, latest.id)
        return PromoteHistory(
            promotion_id=latest.id,
            state=latest.state,
            execution_arn=_arn(link),
            console_url=_console_url(link),
            events=events,
        )


def _arn(link: ExecutionLink | None) -> str | None:
    return None if link is None else link.arn


def _console_url(link: ExecutionLink | None) -> str | None:
    """None locally: the local supervisor's executions have no page elsewhere."""
    return None if link is None else link.console_url


def _current_run(review: Review) -> RunRef | None:
    return None if review.execution is None else review.run_of(review.execution)
