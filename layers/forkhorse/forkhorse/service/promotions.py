"""Promote: the only path that writes canonical.

The request checks authority and consent, records a `queued` promotion (one live job per
review) and starts the promote job through the `PromoteJobs` port: a local thread, or the
PromoteFunction on AWS. The job runs here, in whichever process, and keeps its outcome in
the Store, so any process answers `GET .../promotion`.

Under the project's workflow lease (the mutex, with a fencing token) the job reconciles
any orphaned or uncertain promotion, rechecks consent, claim and heads, begins its
promotion (`pending`, which fences the project), and in required mode reruns the checks
with a new generation and the `before-promote` trigger. Only then does it arm the
promotion with its digest (`writing`), mint the canonical write capability and
fast-forward canonical with a compare-and-set. A refusal settles the promotion `failed`
with the exact answer; an exception during the write leaves it `uncertain`, which fences
the project until the next promote reconciles it against canonical's actual head.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from forkhorse.domain.gate import consent_reasons, validate_required
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.domain.model import (
    LedgerEntry,
    Project,
    Promotion,
    PromotionMode,
    Refusal,
    Review,
    SettledState,
)
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.ports.jobs import PromoteJob, PromoteJobs
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
ALREADY_RUNNING = "A promote of this review is already running."
NO_PROMOTION = "This review has no promotion."
JOB_STOPPED = "The promote job stopped before it finished; nothing was written. Promote again."
_STOPPED = Refusal(status=409, error=JOB_STOPPED)
NOT_LANDED = "The promotion's canonical write did not land; nothing was written."
_LEASE_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class PromoteAnswer:
    """200 with the promotion, 202 while its job runs, or the job's refusal."""

    status: int
    body: Json


def _refusal(error: ServiceError) -> Refusal:
    reasons = None if error.reasons is None else tuple(error.reasons)
    return Refusal(status=error.status, error=error.message, reasons=reasons)


def _mode(project: Project) -> PromotionMode:
    return "required" if project.effective_settings.require_receipt else "advisory"


class Promotions:
    def __init__(self, context: Context, jobs: PromoteJobs) -> None:
        self._c = context
        self._jobs = jobs

    # --- the request --------------------------------------------------------------------
    def promote(
        self,
        caller: Caller,
        project_id: str,
        review_id: str,
        commit: str,
        wait_seconds: float | None = None,
    ) -> PromoteAnswer:
        """Queue the promote job and wait for it up to `wait_seconds` (the configured
        default when None); 202 with the pending promotion if it is still running."""
        project = self._c.owned_project(caller, project_id, "promote reviews")
        review = self._c.project_review(project, review_id)
        self.preconditions(review, commit)
        now = self._c.clock.now()
        queued = Promotion(
            id=str(uuid.uuid4()),
            project_id=project.id,
            review_id=review.id,
            commit=commit,
            state="queued",
            mode=_mode(project),
            started_at=now,
            deadline=now + timedelta(seconds=self._c.settings.promote_job_seconds),
        )
        if not self._c.store.request_promotion(queued, now):
            raise Conflict(ALREADY_RUNNING)
        try:
            self._jobs.start(
                PromoteJob(project_id=project.id, promotion_id=queued.id), self.run_job
            )
        except Exception:
            self._settle(queued, "failed", refusal=Refusal(status=409, error=PROMOTE_FAILED))
            raise
        return self._await(queued, self._wait(wait_seconds))

    def wait(self, review_id: str, wait_seconds: float | None = None) -> PromoteAnswer | None:
        """Wait on the review's latest promote job; None when it has none."""
        review = self._c.store.get_review(review_id)
        latest = None if review is None else self._latest(review)
        return None if latest is None else self._await(latest, self._wait(wait_seconds))

    def status(self, caller: Caller, project_id: str, review_id: str) -> PromoteAnswer:
        """What the promote request would have answered: 202 while it runs, then its result."""
        project = self._c.owned_project(caller, project_id, "read promotions")
        review = self._c.project_review(project, review_id)
        latest = self._latest(review)
        if latest is None:
            raise NotFound(NO_PROMOTION)
        return self._answer(latest)

    def _wait(self, wait_seconds: float | None) -> float:
        return self._c.settings.promote_wait_seconds if wait_seconds is None else wait_seconds

    def _latest(self, review: Review) -> Promotion | None:
        promotions = self._c.store.list_promotions(review.project_id)
        return next((p for p in reversed(promotions) if p.review_id == review.id), None)

    def _await(self, promotion: Promotion, wait_seconds: float) -> PromoteAnswer:
        """Reread the job's promotion until it settles or `wait_seconds` pass."""
        deadline = time.monotonic() + wait_seconds
        while True:
            current = self._c.store.get_promotion(promotion.project_id, promotion.id)
            answer = self._answer(current or promotion)
            if answer.status != 202 or time.monotonic() >= deadline:
                return answer
            time.sleep(self._c.settings.promote_poll_seconds)

    def _answer(self, promotion: Promotion) -> PromoteAnswer:
        if promotion.job_is_live(self._c.clock.now()):
            return PromoteAnswer(202, {"promotion": pending_promotion_json(promotion)})
        if promotion.state == "done":
            entry = next(
                e
                for e in self._c.store.ledger(promotion.project_id)
                if e.promotion_id == promotion.id
            )
            return PromoteAnswer(200, {"promotion": promotion_json(promotion, entry)})
        if promotion.state == "failed":
            refusal = promotion.refusal or Refusal(status=409, error=PROMOTE_FAILED)
            error = ServiceError(refusal.error, reasons=_list(refusal.reasons))
            return PromoteAnswer(refusal.status, error.body())
        # A job that died: nothing was written before `writing`; after it, who knows.
        stopped = promotion.state in ("queued", "pending")
        return PromoteAnswer(409, {"error": JOB_STOPPED if stopped else UNCERTAIN})

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

    # --- the job, in whichever process runs it ------------------------------------------
    def run_job(self, job: PromoteJob) -> Promotion | None:
        """Run a queued promotion to its end and keep the outcome in the Store; returns the
        promotion as it ended (None if there was nothing queued, e.g. a redelivery)."""
        queued = self._c.store.get_promotion(job.project_id, job.promotion_id)
        if queued is None or queued.state != "queued":
            log.info("promote job %s has nothing queued", job.promotion_id)
            return queued
        try:
            self._run_queued(queued)
        except ServiceError as refused:
            self._refuse(queued, refused)
        except Exception:
            log.exception("promote job %s failed", queued.id)
            self._refuse(queued, Conflict(PROMOTE_FAILED))
        return self._c.store.get_promotion(job.project_id, job.promotion_id)

    def _refuse(self, promotion: Promotion, refused: ServiceError) -> None:
        """Settle a job that never reached the canonical write as failed, with its answer.
        A writing or uncertain promotion is left to the write path and reconciliation."""
        current = self._c.store.get_promotion(promotion.project_id, promotion.id)
        if current is not None and current.state in ("queued", "pending"):
            self._settle(current, "failed", refusal=_refusal(refused))

    def _run_queued(self, queued: Promotion) -> None:
        if queued.deadline is not None and self._c.clock.now() >= queued.deadline:
            raise Conflict(JOB_STOPPED)  # too late: its request has been told it stopped
        token = self._acquire_lease(queued.project_id, queued.id)
        try:
            self._promote_locked(queued, token)
        finally:
            self._c.store.release_lease(queued.project_id, queued.id, token)

    def _acquire_lease(self, project_id: str, holder: str) -> int:
        """Wait for the mutex: concurrent promotes of a project run one after another."""
        deadline = time.monotonic() + self._c.settings.lease_wait_seconds
        while True:
            token = self._c.store.acquire_lease(
                project_id, holder, self._c.settings.lease_ttl, self._c.clock.now()
            )
            if token is not None:
                return token
            if time.monotonic() > deadline:
                raise Conflict(LEASE_BUSY)
            time.sleep(_LEASE_POLL_SECONDS)

    def _promote_locked(self, queued: Promotion, token: int) -> None:
        project_id = queued.project_id
        self._reconcile(project_id)
        project = self._c.store.get_project(project_id)
        review = self._c.store.get_review(queued.review_id)
        if project is None or review is None:
            raise NotFound("The review is gone.")
        # Settings are read under the lock: a change affects every later promote.
        required = project.effective_settings.require_receipt
        commit = queued.commit
        self.preconditions(review, commit)
        pending = queued.model_copy(
            update={
                "state": "pending",
                "mode": _mode(project),
                "previous_head": self._c.require_fast_forward(project_id, commit),
                # advisory: the digest known now, whatever runs or lands later
                "digest": None if required or review.execution is None else review.execution.digest,
            }
        )
        if not self._c.store.begin_promotion(pending, token, self._c.clock.now()):
            raise Conflict(FENCED)
        digest = self._before_promote(review, commit) if required else pending.digest
        self._recheck(pending)
        if not self._c.store.arm_promotion(
            project_id, pending.id, digest, token, self._c.clock.now()
        ):
            raise Conflict(LEASE_LOST)
        self._write_canonical(pending.model_copy(update={"state": "writing", "digest": digest}))

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

    def _recheck(self, promotion: Promotion) -> None:
        """Right before the write: the claim and both heads still hold (arming the
        promotion then checks the lease, atomically)."""
        review = self._c.store.get_review(promotion.review_id)
        if review is None:
            raise NotFound("The review is gone.")
        self._c.require_live_claim(review)
        self._c.require_fork_head(review, promotion.commit)
        if self._c.repos(promotion.project_id).head() != promotion.previous_head:
            raise Conflict(CANONICAL_MOVED)

    def _write_canonical(self, promotion: Promotion) -> None:
        repos = self._c.repos(promotion.project_id)
        capability = mint_canonical_write_capability(promotion.project_id)
        try:
            moved = repos.update_canonical_ref(
                capability, DEFAULT_BRANCH, promotion.previous_head, promotion.commit
            )
        except Exception:
            log.exception("canonical write of promotion %s has an unknown outcome", promotion.id)
            self._settle(promotion, "uncertain")
            return
        if not moved:
            self._settle(promotion, "failed", refusal=Refusal(status=409, error=CANONICAL_MOVED))
            return
        if not self._settle(promotion, "done", self._ledger_entry(promotion)):
            log.error("promotion %s landed but did not settle; it stays open", promotion.id)

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
        self,
        promotion: Promotion,
        state: SettledState,
        entry: LedgerEntry | None = None,
        refusal: Refusal | None = None,
    ) -> bool:
        return self._c.store.settle_promotion(
            promotion.project_id, promotion.id, state, entry, self._c.clock.now(), refusal
        )

    def recover_after_restart(self) -> int:
        """Local mode, at start: no promote job survives a restart of its process. Queued
        ones stop; open ones are reconciled under the lease. Returns how many were settled."""
        settled = 0
        for project in self._c.store.list_projects():
            for promotion in self._c.store.list_promotions(project.id):
                if promotion.state == "queued":
                    settled += self._settle(promotion, "failed", refusal=_STOPPED)
            if self._c.store.open_promotion(project.id) is None:
                continue
            holder = f"recovery-{uuid.uuid4()}"
            token = self._acquire_lease(project.id, holder)
            try:
                self._reconcile(project.id)
                settled += 1
            finally:
                self._c.store.release_lease(project.id, holder, token)
        return settled

    def _reconcile(self, project_id: str) -> None:
        """Holding the lease, settle a promotion left open by a dead job or an unknown
        write. A pending one never reached the write; for a writing or uncertain one,
        canonical's actual head says whether its compare-and-set landed."""
        open_promotion = self._c.store.open_promotion(project_id)
        if open_promotion is None:
            return
        if open_promotion.state == "pending":
            self._settle(open_promotion, "failed", refusal=_STOPPED)
        elif self._c.repos(project_id).head() == open_promotion.commit:
            self._settle(open_promotion, "done", self._ledger_entry(open_promotion))
        else:
            self._settle(open_promotion, "failed", refusal=Refusal(status=409, error=NOT_LANDED))
        log.warning("reconciled promotion %s of %s", open_promotion.id, project_id)


def _list(reasons: tuple[str, ...] | None) -> list[str] | None:
    return None if reasons is None else list(reasons)
