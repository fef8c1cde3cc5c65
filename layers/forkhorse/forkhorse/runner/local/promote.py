"""The local PromoteRun: the promote steps in the state machine's order, on a thread, with
each step's output journaled before the next begins.

Acquire (retried while the lease is busy), StartRun, RunChecks (the nested receipt run:
started on the fair scheduler and waited for, renewing the lease meanwhile), Verify,
Write, Release; any failure goes to Settle, as the state machine's Catch does.

After a restart `resume` continues every unfinished workflow from its last completed step
under the token it journaled (its lease outlives the process). A before-promote run the
restart interrupted is an infrastructure error, so its Verify refuses with the exact 409.
An open promotion no workflow will resume is settled at once by taking the lease as its
holder (the promotion itself), never by waiting for a dead process's lease to expire.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forkhorse.domain.run import RunRef
from forkhorse.ports.journal import ENDED, STARTED, PromoteJournal
from forkhorse.runner.local.history import HISTORY_SUFFIX, ExecutionHistory, read_history
from forkhorse.runner.workflow.contracts import to_wire
from forkhorse.service.context import Context
from forkhorse.service.promote import steps
from forkhorse.service.promote.contracts import PromoteStart, PromoteState

log = logging.getLogger(__name__)

Step = Callable[[steps.PromoteDeps, PromoteState], PromoteState]
# Called after each journal write with the step's name (tests kill the process there).
AfterStep = Callable[[str], None]

RUN_CHECKS = "RunChecks"
_LEASE_RETRY_FIRST = 0.05
_LEASE_RETRY_MAX = 2.0
_RENEW_EVERY_SECONDS = 60.0


def promote_execution_name(promotion_id: str) -> str:
    return f"promote-{promotion_id}"


class LocalPromotes:
    """Runs and resumes promote workflows in this process."""

    def __init__(
        self,
        context: Context,
        journal: PromoteJournal,
        history_dir: Path,
        after_step: AfterStep | None = None,
    ) -> None:
        self._c = context
        self._journal = journal
        self._history_dir = history_dir
        self._after_step = after_step or (lambda _step: None)
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._booted_at = context.clock.now()
        self._recovery: threading.Thread | None = None

    # --- the Orchestrator's promote half --------------------------------------------------

    def start(self, project_id: str, promotion_id: str) -> str:
        state = to_wire(PromoteStart(project_id=project_id, promotion_id=promotion_id))
        if not self._journal.start(promotion_id, state, self._c.clock.now()):
            raise ValueError("this promotion's workflow has already started")
        self._history(promotion_id).add(
            "ExecutionStarted", executionStartedEventDetails={"input": str(state)}
        )
        self._spawn(promotion_id)
        return promote_execution_name(promotion_id)

    def history(self, promotion_id: str) -> list[dict[str, Any]]:
        return read_history(self._history_path(promotion_id))

    def wait(self, promotion_id: str, timeout_seconds: float) -> bool:
        """Tests: block until this process's workflow of the promotion ends."""
        with self._lock:
            thread = self._threads.get(promotion_id)
        if thread is not None:
            thread.join(timeout_seconds)
        return thread is None or not thread.is_alive()

    # --- after a restart ------------------------------------------------------------------

    def resume_in_background(self) -> None:
        """Recovery never delays the server: it runs on its own thread."""
        self._recovery = threading.Thread(target=self.resume, name="promote-recovery")
        self._recovery.daemon = True
        self._recovery.start()

    def recovered(self, timeout_seconds: float | None = None) -> bool:
        """Wait for the background recovery to have resumed and settled what it found."""
        if self._recovery is not None:
            self._recovery.join(timeout_seconds)
        return self._recovery is None or not self._recovery.is_alive()

    def resume(self) -> list[str]:
        """Continue every unfinished workflow; settle promotions none will finish."""
        resumed = self._journal.unfinished()
        for promotion_id in resumed:
            log.warning("resuming promote workflow %s", promotion_id)
            self._spawn(promotion_id)
        self._settle_orphans()
        return resumed

    def _settle_orphans(self) -> None:
        """Promotions from before this process whose workflow never started (or left no
        journal): requests since the boot are this process's own."""
        for project in self._c.store.list_projects():
            for promotion in self._c.store.list_promotions(project.id):
                journaled = self._journal.last(promotion.id) is not None
                if journaled or promotion.started_at >= self._booted_at:
                    continue
                if promotion.state in ("queued", "pending", "writing"):
                    # its workflow died with its process
                    steps.settle_stopped(self._c, project.id, promotion.id)

    # --- one workflow ---------------------------------------------------------------------

    def _spawn(self, promotion_id: str) -> None:
        thread = threading.Thread(
            target=self._drive, args=(promotion_id,), name=promote_execution_name(promotion_id)
        )
        thread.daemon = True
        with self._lock:
            self._threads[promotion_id] = thread
        thread.start()

    def _history_path(self, promotion_id: str) -> Path:
        return self._history_dir / f"{promote_execution_name(promotion_id)}{HISTORY_SUFFIX}"

    def _history(self, promotion_id: str) -> ExecutionHistory:
        return ExecutionHistory(self._history_path(promotion_id), self._c.clock)

    def _drive(self, promotion_id: str) -> None:
        try:
            history = self._history(promotion_id)
            _Workflow(self._c, self._journal, history, self._after_step, promotion_id).run()
        except Exception:
            log.exception("promote workflow %s stopped", promotion_id)
        finally:
            with self._lock:
                self._threads.pop(promotion_id, None)


class _Workflow:
    """One promotion's path through PromoteRun, from its last journaled step."""

    _ORDER: tuple[str, ...] = (STARTED, "Acquire", "StartRun", RUN_CHECKS, "Verify", "Write")

    def __init__(
        self,
        context: Context,
        journal: PromoteJournal,
        history: ExecutionHistory,
        after_step: AfterStep,
        promotion_id: str,
    ) -> None:
        self._c = context
        self._journal = journal
        self._history = history
        self._after_step = after_step
        self._id = promotion_id

    def run(self) -> None:
        last = self._journal.last(self._id)
        if last is None or last[0] == ENDED:
            return
        done, state = last[0], PromoteState.model_validate(last[1])
        if done in ("Release", "Settle"):
            self._end(state, failed=done == "Settle")
            return
        remaining = self._ORDER[self._ORDER.index(done) + 1 :]
        try:
            for name in remaining:
                state = self._step(name, self._body(name), state)
            state = self._step("Release", steps.promote_release, state)
        except Exception as failure:  # as the state machine's Catch, Release's included
            failed = state.model_copy(update={"error": _error(failure)})
            state = self._step("Settle", steps.promote_settle, failed)
            self._end(state, failed=True)
            return
        self._end(state, failed=False)

    def _body(self, name: str) -> Step:
        return {
            "Acquire": self._acquire,
            "StartRun": steps.promote_start_run,
            RUN_CHECKS: self._run_checks,
            "Verify": steps.promote_verify,
            "Write": steps.promote_write,
        }[name]

    def _step(self, name: str, body: Step, state: PromoteState) -> PromoteState:
        self._history.entered("Task", name, to_wire(state))
        try:
            output = body(self._c, state)
        except Exception as failure:
            self._history.add(
                "TaskFailed", taskFailedEventDetails={"resource": name, **_error(failure)}
            )
            raise
        self._journal.record(self._id, name, to_wire(output), self._c.clock.now())
        self._history.exited("Task", name, to_wire(output))
        self._after_step(name)
        return output

    def _end(self, state: PromoteState, failed: bool) -> None:
        output = to_wire(state)
        self._journal.record(self._id, ENDED, output, self._c.clock.now())
        if failed:
            details = state.error or {}
            self._history.add("ExecutionFailed", executionFailedEventDetails=details)
        else:
            self._history.add(
                "ExecutionSucceeded", executionSucceededEventDetails={"output": str(output)}
            )

    # --- the states Step Functions runs itself ---------------------------------------------

    def _acquire(self, deps: steps.PromoteDeps, state: PromoteState) -> PromoteState:
        """Acquire with the state machine's Retry: back off while the lease is busy."""
        deadline = time.monotonic() + deps.settings.lease_wait_seconds
        pause = _LEASE_RETRY_FIRST
        while True:
            try:
                return steps.promote_acquire(deps, state)
            except steps.LeaseBusy:
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, _LEASE_RETRY_MAX)

    def _run_checks(self, deps: steps.PromoteDeps, state: PromoteState) -> PromoteState:
        """The nested receipt run (`startExecution.sync`): start it unless a restart ended
        it, and wait for it within the lease, renewing the lease meanwhile. A run still
        going at the lease's end is stopped; Verify then refuses."""
        run = state.run
        if run is None:
            return state
        review = deps.store.get_review(run.review_id)
        execution = None if review is None else review.execution
        current = execution is not None and execution.generation == run.generation
        if current and execution is not None and execution.is_running:
            self._start_once(deps, run)
        bound = time.monotonic() + float(state.lease_seconds or 0)
        while not deps.orchestrator.wait(run, _RENEW_EVERY_SECONDS):
            if time.monotonic() > bound:
                deps.orchestrator.cancel_run(run)
                break
            state = steps.promote_renew(deps, state)
        return state

    @staticmethod
    def _start_once(deps: steps.PromoteDeps, run: RunRef) -> None:
        with contextlib.suppress(ValueError):  # it started already, in this process
            deps.orchestrator.start_run(run)


def _error(failure: BaseException) -> dict[str, str]:
    return steps.error_of(failure)
