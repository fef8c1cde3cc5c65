"""Promote: the only path that writes canonical.

Under the project's workflow lease (the mutex, with a fencing token) it reconciles any
orphaned or uncertain promotion, rechecks consent, claim and heads, and in required mode
reruns the checks with a new generation and the `before-promote` trigger. Only then does
it mint the canonical write capability and fast-forward canonical with a compare-and-set.
An exception during the write leaves the promotion `uncertain`, which fences the project
until the next promote reconciles it against canonical's actual head.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from forkhorse.domain.gate import consent_reasons, validate_required
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.domain.model import (
    LedgerEntry,
    Project,
    Promotion,
    PromotionMode,
    Review,
    SettledState,
)
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service.approvals import gather_evidence
from forkhorse.service.context import Context
from forkhorse.service.errors import (
    CHECKS_FAILED_BEFORE_PROMOTE,
    Conflict,
    NotFound,
    ServiceError,
)
from forkhorse.service.identity import Caller
from forkhorse.service.reviews import start_run
from forkhorse.service.views import Json, pending_promotion_json, promotion_json

log = logging.getLogger(__name__)

CONSENT_MISSING = "Promote needs the owner's approval of this exact commit."
UNCERTAIN = (
    "The promotion's outcome is uncertain; promotes of this project are fenced until "
    "the next promote reconciles it."
)
FENCED = "Another promotion of this project is open; try again when it settles."
LEASE_BUSY = "The project's workflow is busy; try again."
CANONICAL_MOVED = "Canonical moved during promote; nothing was written."
LEASE_LOST = "The project's workflow lease was lost during promote; nothing was written."
PROMOTE_FAILED = "The promotion failed."
_LEASE_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class PromoteAnswer:
    """200 with the promotion, or 202 while the job outlasts the request."""

    status: int
    body: Json


@dataclass
class _Job:
    commit: str
    mode: PromotionMode
    future: Future[Json]


class Promotions:
    def __init__(self, context: Context, executor: Executor) -> None:
        self._c = context
        self._executor = executor
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    # --- the request --------------------------------------------------------------------
    def promote(
        self,
        caller: Caller,
        project_id: str,
        review_id: str,
        commit: str,
        wait_seconds: float | None = None,
    ) -> PromoteAnswer:
        """Start the promote job and wait for it up to `wait_seconds` (the configured
        default when None); 202 with the pending promotion if it is still running."""
        project = self._c.owned_project(caller, project_id, "promote reviews")
        review = self._c.project_review(project, review_id)
        self.preconditions(review, commit)
        mode: PromotionMode = (
            "required" if project.effective_settings.require_receipt else "advisory"
        )
        with self._lock:
            running = self._jobs.get(review.id)
            if running is not None and not running.future.done():
                raise Conflict("A promote of this review is already running.")
            job = _Job(commit, mode, self._executor.submit(self._job, project, review.id, commit))
            self._jobs[review.id] = job
        wait = self._c.settings.promote_wait_seconds if wait_seconds is None else wait_seconds
        return self._answer(job, wait)

    def wait(self, review_id: str, wait_seconds: float | None = None) -> PromoteAnswer | None:
        """Wait on a review's running promote job; None when there is none in this process."""
        with self._lock:
            job = self._jobs.get(review_id)
        if job is None:
            return None
        wait = self._c.settings.promote_wait_seconds if wait_seconds is None else wait_seconds
        return self._answer(job, wait)

    def status(self, caller: Caller, project_id: str, review_id: str) -> PromoteAnswer:
        """What the promote request would have answered: 202 while it runs, then its result."""
        project = self._c.owned_project(caller, project_id, "read promotions")
        review = self._c.project_review(project, review_id)
        with self._lock:
            job = self._jobs.get(review.id)
        if job is not None:
            return self._answer(job, 0)
        return self._stored_status(review)

    def _answer(self, job: _Job, wait_seconds: float) -> PromoteAnswer:
        try:
            return PromoteAnswer(200, job.future.result(timeout=wait_seconds))
        except FutureTimeout:
            pending = {"id": None, "state": "pending", "commit": job.commit, "mode": job.mode}
            return PromoteAnswer(202, {"promotion": pending})

    def _stored_status(self, review: Review) -> PromoteAnswer:
        promotions = [
            p for p in self._c.store.list_promotions(review.project_id) if p.review_id == review.id
        ]
        if not promotions:
            raise NotFound("This review has no promotion.")
        latest = promotions[-1]
        if latest.state == "pending":
            return PromoteAnswer(202, {"promotion": pending_promotion_json(latest)})
        if latest.state == "uncertain":
            raise Conflict(UNCERTAIN)
        if latest.state == "failed":
            raise Conflict(PROMOTE_FAILED)
        entry = next(
            e for e in self._c.store.ledger(review.project_id) if e.promotion_id == latest.id
        )
        return PromoteAnswer(200, {"promotion": promotion_json(latest, entry)})

    # --- checks both modes apply -------------------------------------------------------
    def preconditions(self, review: Review, commit: str) -> None:
        """What promote checks before any run, in both modes (the console shows them too)."""
        reasons = consent_reasons(review.approval, commit)
        if reasons:
            raise Conflict(CONSENT_MISSING, reasons=reasons)
        if review.commit != commit:
            raise Conflict(f"The review is at commit {review.commit}, not {commit}.")
        self._c.require_live_claim(review)
        self._c.require_fork_head(review, commit)
        self._c.require_fast_forward(review.project_id, commit)

    # --- the job, under the workflow lease --------------------------------------------
    def _job(self, project: Project, review_id: str, commit: str) -> Json:
        holder = str(uuid.uuid4())
        token = self._acquire_lease(project.id, holder)
        try:
            return self._promote_locked(project.id, review_id, commit, holder, token)
        finally:
            self._c.store.release_lease(project.id, holder, token)

    def _acquire_lease(self, project_id: str, holder: str) -> int:
        """Wait for the mutex: concurrent promotes of a project run one after another."""
        deadline = time.monotonic() + self._c.settings.lease_ttl.total_seconds()
        while True:
            token = self._c.store.acquire_lease(
                project_id, holder, self._c.settings.lease_ttl, self._c.clock.now()
            )
            if token is not None:
                return token
            if time.monotonic() > deadline:
                raise Conflict(LEASE_BUSY)
            time.sleep(_LEASE_POLL_SECONDS)

    def _promote_locked(
        self, project_id: str, review_id: str, commit: str, holder: str, token: int
    ) -> Json:
        self._reconcile(project_id)
        project = self._c.store.get_project(project_id)
        review = self._c.store.get_review(review_id)
        if project is None or review is None:
            raise NotFound("The review is gone.")
        # Settings are read under the lock: a change affects every later promote.
        required = project.effective_settings.require_receipt
        self.preconditions(review, commit)
        old_head = self._c.require_fast_forward(project_id, commit)
        digest: str | None
        if required:
            digest = self._before_promote(review, commit)
        else:  # advisory: the digest known now, whatever runs or lands later
            digest = None if review.execution is None else review.execution.digest
        promotion = Promotion(
            id=holder,
            project_id=project_id,
            review_id=review.id,
            commit=commit,
            digest=digest,
            started_at=self._c.clock.now(),
            mode="required" if required else "advisory",
            previous_head=old_head,
        )
        if not self._c.store.begin_promotion(promotion, token, self._c.clock.now()):
            raise Conflict(FENCED)
        try:
            self._recheck(promotion, token)
        except ServiceError:
            self._settle(promotion, "failed")
            raise
        return self._write_canonical(promotion)

    def _before_promote(self, review: Review, commit: str) -> str:
        """A fresh required run; anything but a passing, matching record refuses promote."""
        run = start_run(self._c, review, commit, "before-promote")
        finished = self._c.orchestrator.wait(run, self._c.settings.promote_run_timeout_seconds)
        current = self._c.store.get_review(review.id)
        if not finished or current is None or current.execution is None:
            raise Conflict(CHECKS_FAILED_BEFORE_PROMOTE)
        evidence = gather_evidence(
            self._c,
            current,
            commit,
            expected_generation=run.generation,
            expected_trigger="before-promote",
        )
        reasons = validate_required(evidence)
        digest = current.execution.digest
        if reasons or digest is None:
            log.info("before-promote checks refused %s: %s", review.id, reasons)
            raise Conflict(CHECKS_FAILED_BEFORE_PROMOTE)
        return digest

    def _recheck(self, promotion: Promotion, token: int) -> None:
        """Right before the write: the claim, both heads and the lease still hold."""
        review = self._c.store.get_review(promotion.review_id)
        if review is None:
            raise NotFound("The review is gone.")
        self._c.require_live_claim(review)
        self._c.require_fork_head(review, promotion.commit)
        if self._c.repos(promotion.project_id).head() != promotion.previous_head:
            raise Conflict(CANONICAL_MOVED)
        if not self._c.store.check_fence(promotion.project_id, token, self._c.clock.now()):
            raise Conflict(LEASE_LOST)

    def _write_canonical(self, promotion: Promotion) -> Json:
        repos = self._c.repos(promotion.project_id)
        capability = mint_canonical_write_capability(promotion.project_id)
        try:
            moved = repos.update_canonical_ref(
                capability, DEFAULT_BRANCH, promotion.previous_head, promotion.commit
            )
        except Exception:
            log.exception("canonical write of promotion %s has an unknown outcome", promotion.id)
            self._settle(promotion, "uncertain")
            raise Conflict(UNCERTAIN) from None
        if not moved:
            self._settle(promotion, "failed")
            raise Conflict(CANONICAL_MOVED)
        entry = self._ledger_entry(promotion)
        if not self._settle(promotion, "done", entry):
            raise Conflict(UNCERTAIN)
        return {"promotion": promotion_json(promotion, entry)}

    def _ledger_entry(self, promotion: Promotion) -> LedgerEntry:
        return LedgerEntry(
            project_id=promotion.project_id,
            promotion_id=promotion.id,
            review_id=promotion.review_id,
            commit=promotion.commit,
            previous_head=promotion.previous_head,
            digest=promotion.digest,
            promoted_at=self._c.clock.now(),
        )

    def _settle(
        self, promotion: Promotion, state: SettledState, entry: LedgerEntry | None = None
    ) -> bool:
        return self._c.store.settle_promotion(
            promotion.project_id, promotion.id, state, entry, self._c.clock.now()
        )

    def _reconcile(self, project_id: str) -> None:
        """Holding the lease, settle a promotion left open by a crash or an unknown write:
        canonical's actual head says whether its compare-and-set landed."""
        open_promotion = self._c.store.open_promotion(project_id)
        if open_promotion is None:
            return
        if self._c.repos(project_id).head() == open_promotion.commit:
            self._settle(open_promotion, "done", self._ledger_entry(open_promotion))
        else:
            self._settle(open_promotion, "failed")
        log.warning("reconciled promotion %s of %s", open_promotion.id, project_id)
