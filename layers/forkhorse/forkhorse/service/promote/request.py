"""Promote: the only path that writes canonical.

The request checks authority and consent, records a `queued` promotion (one live promote
per review) and starts the PromoteRun workflow through the Orchestrator port: Step Functions
on AWS, the local supervisor's journaled runner locally. The workflow's steps
(`service/promote/steps.py`) keep the outcome in the Store, so any process answers
`GET .../promotion`; the request waits a short time for it and otherwise answers 202.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from forkhorse.domain.model import Promotion, Refusal, RefusalKind, Review
from forkhorse.responses import ErrorBody, Promoted, PromotionPending
from forkhorse.service.context import Context
from forkhorse.service.errors import Conflict, NotFound, ServiceError, refused_with
from forkhorse.service.identity import Caller
from forkhorse.service.promote import rules
from forkhorse.service.promote.rules import (  # noqa: F401 - the answers, importable here
    ALREADY_RUNNING,
    CANONICAL_MOVED,
    CONSENT_MISSING,
    FENCED,
    JOB_STOPPED,
    LEASE_BUSY,
    LEASE_LOST,
    NO_PROMOTION,
    NOT_LANDED,
    PROMOTE_FAILED,
    UNCERTAIN,
)
from forkhorse.service.views import done_promotion, pending_promotion


@dataclass(frozen=True)
class PromoteAnswer:
    """The promotion (done, or pending while its workflow runs), or the workflow's refusal
    (`refused` says its kind)."""

    body: Promoted | PromotionPending | ErrorBody
    refused: RefusalKind | None = None

    @property
    def pending(self) -> bool:
        return isinstance(self.body, PromotionPending)

    def accepted(self) -> Promoted | PromotionPending:
        """The promotion, done or pending; a refusal is raised instead."""
        if isinstance(self.body, ErrorBody):
            raise refused_with(self.refused or "conflict", self.body)
        return self.body


class Promotions:
    def __init__(self, context: Context) -> None:
        self._c = context

    # --- the request --------------------------------------------------------------------
    def promote(
        self,
        caller: Caller,
        project_id: str,
        review_id: str,
        commit: str,
        wait_seconds: float | None = None,
    ) -> PromoteAnswer:
        """Start the promote workflow and wait for it up to `wait_seconds` (the configured
        default when None); 202 with the pending promotion if it is still running."""
        project = self._c.owned_project(caller, project_id, "promote reviews")
        review = self._c.visible_review(caller, project, review_id)
        self.preconditions(review, commit)
        now = self._c.clock.now()
        queued = Promotion(
            id=str(uuid.uuid4()),
            project_id=project.id,
            review_id=review.id,
            commit=commit,
            state="queued",
            mode=rules.mode_of(project),
            started_at=now,
            deadline=now + timedelta(seconds=self._c.settings.promote_job_seconds),
        )
        try:
            requested = self._c.store.request_promotion(queued, now)
            if requested:
                self._c.orchestrator.start_promote(project.id, queued.id)
        except Exception:
            # The request may have landed (its reply was lost) with no job to run it: fail
            # it now rather than read as pending, and fence the review, until its deadline.
            rules.settle(
                self._c, queued, "failed", refusal=Refusal(kind="conflict", error=PROMOTE_FAILED)
            )
            raise
        if not requested:
            raise Conflict(ALREADY_RUNNING)
        return self._await(queued, self._wait(wait_seconds))

    def status(self, caller: Caller, project_id: str, review_id: str) -> PromoteAnswer:
        """What the promote request would have answered: 202 while it runs, then its result."""
        project = self._c.owned_project(caller, project_id, "read promotions")
        review = self._c.visible_review(caller, project, review_id)
        latest = self._c.store.latest_promotion(review.project_id, review.id)
        if latest is None:
            raise NotFound(NO_PROMOTION)
        return self._answer(latest)

    def _wait(self, wait_seconds: float | None) -> float:
        return self._c.settings.promote_wait_seconds if wait_seconds is None else wait_seconds

    def _await(self, promotion: Promotion, wait_seconds: float) -> PromoteAnswer:
        """Reread the job's promotion until it settles or `wait_seconds` pass."""
        deadline = time.monotonic() + wait_seconds
        while True:
            current = self._c.store.get_promotion(promotion.project_id, promotion.id)
            answer = self._answer(current or promotion)
            if not answer.pending or time.monotonic() >= deadline:
                return answer
            time.sleep(self._c.settings.promote_poll_seconds)

    def _answer(self, promotion: Promotion) -> PromoteAnswer:
        if promotion.job_is_live(self._c.clock.now()):
            return PromoteAnswer(PromotionPending(promotion=pending_promotion(promotion)))
        if promotion.state == "done":
            entry = self._c.store.ledger_entry(promotion.project_id, promotion.id)
            assert entry is not None, "a done promotion wrote its entry in the same transaction"
            return PromoteAnswer(Promoted(promotion=done_promotion(promotion, entry)))
        if promotion.state == "failed":
            refusal = promotion.refusal or Refusal(kind="conflict", error=PROMOTE_FAILED)
            error = ServiceError(refusal.error, reasons=_list(refusal.reasons))
            return PromoteAnswer(error.body(), refused=refusal.kind)
        # A job that died: nothing was written before `writing`; after it, who knows.
        stopped = promotion.state in ("queued", "pending")
        return PromoteAnswer(ErrorBody(error=JOB_STOPPED if stopped else UNCERTAIN), "conflict")

    # --- checks both modes apply -------------------------------------------------------
    def preconditions(self, review: Review, commit: str) -> None:
        """What promote checks before any run, in both modes (the console shows them too)."""
        rules.preconditions(self._c, review, commit)


def _list(reasons: tuple[str, ...] | None) -> list[str] | None:
    return None if reasons is None else list(reasons)
