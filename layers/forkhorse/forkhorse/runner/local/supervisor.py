"""The local supervisor: runs ReceiptRun's states in the state machine's order, on threads.

It is the local stand-in for Step Functions. It calls the same step functions with the same
contracts (`runner/workflow/contracts.py`), follows the same choices (discovery, the quick
gate, a full check's wait for its end) and routes any unexpected failure to the
infrastructure-error finalizer, as the state machine's Catch does.

Runs are scheduled fairly (`runner/local/scheduler.py`): per-project and per-agent limits,
before-promote runs first, quick and full checks in separate lanes. A superseded run is
cancelled: queued, it never starts; running, it stops at its next step and its container is
destroyed; either way its history ends with `ExecutionAborted`, as StopExecution's would.

A graceful stop (`shutdown`) drains: nothing more is admitted, every run in flight ends at its
next step (a running container is destroyed at once, its workspace unmounted) as an
infrastructure error that says the service stopped, persisted before the store closes, and
whatever a run did not clean up by the drain deadline is swept (`STOP`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from forkhorse.domain.limits import FORK_STORAGE, QUEUE, STOP, QueueLimits, StopLimits
from forkhorse.domain.model import InvalidatedExecution
from forkhorse.domain.receipts import interrupted_summary
from forkhorse.domain.run import RunRef
from forkhorse.ports.containers import ContainerHandle
from forkhorse.ports.git import PackCollector
from forkhorse.runner.local.history import HISTORY_SUFFIX, ExecutionHistory, read_history
from forkhorse.runner.local.scheduler import (
    Cancelled,
    FairScheduler,
    Job,
    QueueFull,
    Stopped,
    Ticket,
)
from forkhorse.runner.upkeep.collector import DEFAULT_GRACE, collect
from forkhorse.runner.upkeep.recovery import remove_stale_exports
from forkhorse.runner.workflow import steps
from forkhorse.runner.workflow.callbacks import WAIT_MARGIN_SECONDS
from forkhorse.runner.workflow.contracts import (
    ExecutionState,
    Finalized,
    FullItem,
    FullProgress,
    FullResult,
    PreparedChecks,
    QuickGate,
    QuickItem,
    StepResult,
    to_wire,
)

if TYPE_CHECKING:
    from forkhorse.runner.local.promote import LocalPromotes

log = logging.getLogger(__name__)

QUEUE_CHECK_NAME = "receipt queue"
SUPERSEDED = "A newer execution of this review superseded this one."
COLLECT_EVERY = timedelta(seconds=FORK_STORAGE.collect_every_seconds)
CANCEL_CHECK_SECONDS = 0.05  # how soon a superseded run notices, while its container runs
SERVICE_STOPPED = "The service stopped while the check ran."
SERVICE_STOPPED_QUEUED = "The service stopped before this receipt run started."


class LocalSupervisor:
    """Runs receipt executions in the background, fairly, and records their histories."""

    def __init__(
        self,
        deps: steps.RunnerDeps,
        quick_deps: steps.QuickDeps,
        history_dir: Path,
        limits: QueueLimits = QUEUE,
        checkouts: Path | None = None,
        packs: PackCollector | None = None,
        collect_every: timedelta = COLLECT_EVERY,
        collect_grace: timedelta = DEFAULT_GRACE,
    ) -> None:
        self._deps = deps
        self._packs = packs
        self._quick_deps = quick_deps
        self._history_dir = history_dir
        self._scheduler = FairScheduler(limits)
        self._runs: dict[str, Future[None]] = {}
        self._refs: dict[str, RunRef] = {}  # the runs of `_runs`, to end them at a stop
        self._stop_hooks: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        self._checkouts = checkouts
        self._promotes: LocalPromotes | None = None
        self._recovery = threading.Thread(target=lambda: None)
        self._recovery.start()
        self._collect_every = collect_every
        self._collect_grace = collect_grace
        self._collections = 0
        self._upkeep: list[Callable[[], object]] = []
        self._stopping = threading.Event()
        self._collector = threading.Thread(target=lambda: None)
        self._collector.start()

    # --- lifecycle --------------------------------------------------------------------

    def recover(self) -> list[InvalidatedExecution]:
        """After a restart: interrupted runs become infrastructure errors at once (one
        update, before any request can start a run), then orphans go in the background
        while the scheduler admits nothing, so the server need not wait for podman."""
        invalidated = self._deps.store.invalidate_running(self._deps.clock.now())
        if invalidated:
            log.warning("recovered %d interrupted runs", len(invalidated))
        self._scheduler.hold()
        self._recovery = threading.Thread(
            target=self._remove_orphans, name="receipt-recovery", daemon=True
        )
        self._recovery.start()
        return invalidated

    def recovered(self, timeout_seconds: float | None = None) -> bool:
        """Wait for the background recovery; True once it is done."""
        self._recovery.join(timeout_seconds)
        return not self._recovery.is_alive()

    def _remove_orphans(self) -> None:
        try:
            removed = self._deps.containers.cleanup_orphans(frozenset())
            exports = self.remove_stale_exports()
            if removed or exports:
                log.warning(
                    "removed %d orphan containers, %d stale exports", len(removed), len(exports)
                )
        except Exception:
            log.exception("orphan cleanup failed; later runs go ahead")
        finally:
            self._scheduler.release()
        self._collect_garbage()
        self._collector = threading.Thread(
            target=self._collect_periodically, name="garbage-collection", daemon=True
        )
        self._collector.start()

    def _collect_periodically(self) -> None:
        """A long-lived server collects as the AWS schedule does, not only at its start."""
        while not self._stopping.wait(self._collect_every.total_seconds()):
            self._collect_garbage()
            for upkeep in self._upkeep:
                try:
                    upkeep()
                except Exception:
                    log.exception("upkeep failed; it runs again at the next interval")

    def _collect_garbage(self) -> None:
        """Records nothing references, chunks a crash left without a manifest, the
        repositories' unreachable objects (repacked) and each fork's storage charge, settled
        to what its refs keep. Runs after the scheduler is released: the collector is safe
        against live runs and pushes."""
        try:
            now = self._deps.clock.now()
            collection = collect(self._deps.store, now, self._collect_grace, packs=self._packs)
        except Exception:
            log.exception("garbage collection failed; it runs again at the next interval")
            return
        self._collections += 1
        counts = collection.counts()
        log.info(
            "periodic garbage collection %d: %d records, %d orphan chunk sets, %d packs "
            "removed, %d git bytes reclaimed",
            self._collections,
            counts["records"],
            counts["orphans"],
            counts["packs"],
            counts["bytesReclaimed"],
            extra={"collection": counts},
        )

    def remove_stale_exports(self) -> list[Path]:
        """Checkouts exported for executions that are no longer running (a kill leaves them)."""
        if self._checkouts is None:
            return []
        return remove_stale_exports(self._checkouts, self._scheduler.active_keys())

    def attach_upkeep(self, upkeep: Callable[[], object]) -> None:
        """Run `upkeep` after each periodic collection (the log's repair and self-check)."""
        self._upkeep.append(upkeep)

    def attach_promotes(self, promotes: LocalPromotes) -> None:
        """Promote workflows need the service's context, which is built on this supervisor."""
        self._promotes = promotes

    def shutdown(self, limits: StopLimits = STOP) -> None:
        """Drain: admit nothing more, end every run in flight at its next step (its container
        destroyed, its run an infrastructure error that says the service stopped), sweep what
        is left at the drain deadline, then wait for the background recovery and collection:
        they use the store, which the runtime closes next. Bounded by `limits.stop_seconds`."""
        give_up = time.monotonic() + limits.stop_seconds
        self._stopping.set()
        had_active = bool(self._scheduler.active_keys())
        self._scheduler.stop()
        for hook in self._stop_hooks:
            try:
                hook()
            except Exception:
                log.exception("a stop hook failed; the drain goes on")
        dropped, stuck = self._scheduler.shutdown(limits.drain_seconds)
        for job in dropped:
            self._end_stopped(job.key, SERVICE_STOPPED_QUEUED)
            self._resolve(job.key, cancelled=True)
        if stuck:
            log.warning("%d receipt runs did not end within the drain; sweeping", len(stuck))
        for job in stuck:
            self._end_stopped(job.key, SERVICE_STOPPED)
        if had_active:
            self._sweep()
        for thread in (self._recovery, self._collector):
            thread.join(max(0.0, give_up - time.monotonic()))

    def on_stop(self, hook: Callable[[], object]) -> None:
        """Call `hook` once a stop has ended admission and told every run to stop: what ends
        work the runs wait on (`forkhorse serve` kills the quick checks' sandboxes)."""
        self._stop_hooks.append(hook)

    def _sweep(self) -> None:
        """After a drain: every container and workspace of this home goes, whatever run it
        belonged to (a run that ended cleaned up after itself; this catches the rest)."""
        try:
            removed = self._deps.containers.cleanup_orphans(frozenset())
            if removed:
                log.warning("the stop removed %d containers runs left", len(removed))
        except Exception:
            log.exception("the stop's sweep failed; the next start sweeps again")

    def _end_stopped(self, generation: str, message: str) -> None:
        """Persist a run the stop ended as an infrastructure error saying so (a restart then
        shows it; a run that already finished is left as it is)."""
        with self._lock:
            run = self._refs.get(generation)
        if run is None:
            return
        try:
            review = self._deps.store.get_review(run.review_id)
            execution = None if review is None else review.execution
            if execution is None or execution.generation != generation:
                return
            stopped = interrupted_summary(execution.summary, self._deps.clock.now(), message)
            self._deps.store.update_summary(run.review_id, generation, stopped)
            self._history(generation).add("ExecutionAborted", **_stopped(message))
        except Exception:
            log.exception("could not record run %s as stopped; a restart marks it", generation)

    # --- the Orchestrator port ----------------------------------------------------------

    def start_run(self, run: RunRef) -> str:
        with self._lock:
            if run.generation in self._runs or self._history_path(run.generation).exists():
                raise ValueError("this generation has already started")
            self._runs[run.generation] = Future()
            self._refs[run.generation] = run
        job = Job(run.generation, run.project_id, self._agent_of(run), _is_priority(run))
        try:
            self._scheduler.submit(job, lambda ticket: self._execute(run, ticket))
        except QueueFull as full:
            self._refuse(run, str(full))
        return run.generation

    def cancel_run(self, run: RunRef) -> bool:
        """Stop a superseded execution: a queued one never starts; a running one stops at
        its next step and its container is destroyed."""
        cancelled = self._scheduler.cancel(run.generation)
        if cancelled == "queued":
            self._history(run.generation).add("ExecutionAborted", **_aborted())
            self._resolve(run.generation)
        return cancelled is not None

    def wait(self, run: RunRef, timeout_seconds: float) -> bool:
        with self._lock:
            future = self._runs.get(run.generation)
        if future is None:
            return True
        try:
            future.result(timeout=timeout_seconds)
        except TimeoutError:
            return False
        except CancelledError:
            return True
        return True

    def history(self, run: RunRef) -> list[dict[str, Any]]:
        return read_history(self._history_path(run.generation))

    def start_promote(self, project_id: str, promotion_id: str) -> str:
        return self._promoting().start(project_id, promotion_id)

    def promote_history(self, project_id: str, promotion_id: str) -> list[dict[str, Any]]:
        return self._promoting().history(promotion_id)

    def _promoting(self) -> LocalPromotes:
        if self._promotes is None:
            raise RuntimeError("promote workflows are not attached to this supervisor")
        return self._promotes

    # --- one execution ------------------------------------------------------------------

    def _history_path(self, generation: str) -> Path:
        return self._history_dir / f"{generation}{HISTORY_SUFFIX}"

    def _history(self, generation: str) -> ExecutionHistory:
        return ExecutionHistory(self._history_path(generation), self._deps.clock)

    def _agent_of(self, run: RunRef) -> str:
        review = self._deps.store.get_review(run.review_id)
        return "" if review is None else review.agent_id

    def _resolve(self, generation: str, cancelled: bool = False) -> None:
        """The run ended (or will never start): release its waiters and forget it."""
        with self._lock:
            future = self._runs.pop(generation, None)
            self._refs.pop(generation, None)
        if future is None:
            return
        if cancelled:
            future.cancel()
        else:
            future.set_result(None)

    def _refuse(self, run: RunRef, message: str) -> None:
        """A run the queue refused ends at once as an infrastructure error that says why."""
        history = self._history(run.generation)
        history.add("ExecutionFailed", executionFailedEventDetails={"error": "QueueFull"})
        steps.finalize_refused(self._deps, run, QUEUE_CHECK_NAME, message)
        self._resolve(run.generation)

    def _execute(self, run: RunRef, ticket: Ticket) -> None:
        try:
            self._run_to_end(run, ticket)
        finally:
            if self._checkouts is not None:
                steps.discard_checkouts(self._checkouts, run.generation)
            self._resolve(run.generation)

    def _run_to_end(self, run: RunRef, ticket: Ticket) -> None:
        history = self._history(run.generation)
        state = ExecutionState(run=run)
        history.add("ExecutionStarted", executionStartedEventDetails={"input": str(to_wire(state))})
        try:
            output = _Execution(self._deps, self._quick_deps, history, state, ticket).run()
        except Stopped:
            log.warning("receipt run %s was ended by the service's stop", run.generation)
            self._end_stopped(run.generation, SERVICE_STOPPED)
            return
        except Cancelled:
            log.info("receipt run %s was superseded and stopped", run.generation)
            history.add("ExecutionAborted", **_aborted())
            return
        except Exception:
            log.exception("receipt run %s failed on infrastructure", run.generation)
            error_input = ExecutionState(run=run, infrastructure_error=True)
            output = _task(
                self._deps, history, "FinalizeInfrastructureError", steps.finalize, error_input
            )
        history.add(
            "ExecutionSucceeded", executionSucceededEventDetails={"output": str(to_wire(output))}
        )


def _is_priority(run: RunRef) -> bool:
    return run.trigger == "before-promote"


def _aborted() -> dict[str, Any]:
    return {"executionAbortedEventDetails": {"error": "Superseded", "cause": SUPERSEDED}}


def _stopped(message: str) -> dict[str, Any]:
    return {"executionAbortedEventDetails": {"error": "ServiceStopped", "cause": message}}


def _task[I: BaseModel, O: BaseModel](
    deps: steps.RunnerDeps,
    history: ExecutionHistory,
    name: str,
    step: Callable[[steps.RunnerDeps, I], O],
    state: I,
) -> O:
    history.entered("Task", name, to_wire(state))
    output = step(deps, state)
    history.exited("Task", name, to_wire(output))
    return output


class _Execution:
    """The state machine's path through one run, mirroring receipt_run.asl.json."""

    def __init__(
        self,
        deps: steps.RunnerDeps,
        quick_deps: steps.QuickDeps,
        history: ExecutionHistory,
        state: ExecutionState,
        ticket: Ticket,
    ) -> None:
        self._deps = deps
        self._quick_deps = quick_deps
        self._history = history
        self._state = state
        self._ticket = ticket

    def run(self) -> Finalized:
        prepared = self._task("Prepare", steps.prepare, self._state)
        self._state = self._state.model_copy(update={"prepared": prepared})
        if isinstance(prepared, PreparedChecks):
            self._checks(prepared)
        return self._task("Finalize", steps.finalize, self._state)

    def _task[I: BaseModel, O: BaseModel](
        self, name: str, step: Callable[[steps.RunnerDeps, I], O], state: I
    ) -> O:
        self._ticket.check()  # a superseded run stops between steps
        return _task(self._deps, self._history, name, step, state)

    def _checks(self, prepared: PreparedChecks) -> None:
        run = self._state.run
        if prepared.quick_count > 0:
            quick_items = [QuickItem(run=run, check=check) for check in prepared.quick]
            quick = self._map("QuickChecks", quick_items, self._quick)
            gate = QuickGate(closed=not all(item.passed for item in quick))
            self._state = self._state.model_copy(update={"quick": quick, "quick_gate": gate})
            self._choice("QuickGate", to_wire(gate))
            if gate.closed:
                return
        full_items = [FullItem(run=run, check=check) for check in prepared.full]
        full = self._map("FullChecks", full_items, self._full)
        self._state = self._state.model_copy(update={"full": full})

    def _choice(self, name: str, decision: dict[str, Any]) -> None:
        self._history.entered("Choice", name, decision)
        self._history.exited("Choice", name, decision)

    def _map[I: BaseModel, O: BaseModel](
        self, name: str, items: list[I], iteration: Callable[[I], O]
    ) -> list[O]:
        self._history.entered("Map", name, {"items": len(items)})
        results = []
        for index, item in enumerate(items):
            self._history.add(
                "MapIterationStarted",
                mapIterationStartedEventDetails={"name": name, "index": index},
            )
            results.append(iteration(item))
            self._history.add(
                "MapIterationSucceeded",
                mapIterationSucceededEventDetails={"name": name, "index": index},
            )
        self._history.exited("Map", name, [to_wire(result) for result in results])
        return results

    def _quick(self, item: QuickItem) -> StepResult:
        # The state machine picks the quick function by the module's extension; locally one
        # sandbox runs both languages, so only the history shows the choice.
        task = "QuickCheckJs" if item.check.language == "javascript" else "QuickCheck"
        self._choice("QuickRuntime", {"module": item.check.module})
        with self._ticket.slot("quick"):
            self._ticket.check()
            self._history.entered("Task", task, to_wire(item))
            dropped = steps.quick(self._quick_deps, item)
            self._history.exited("Task", task, to_wire(dropped))
        return self._task("QuickRecord", steps.quick_record, dropped)

    def _full(self, item: FullItem) -> FullResult:
        """FullStart waits for the container's end, as its state waits for FullStopped's
        callback; past the check's deadline and the margin, FullOvertime ends it."""
        item = item.model_copy(update={"wait_seconds": _wait_seconds(item)})
        with ExitStack() as slot:
            slot.enter_context(self._ticket.slot("full"))
            self._ticket.check()
            self._history.entered("Task", "FullStart", to_wire(item))
            state = steps.full_start(self._deps, item)
            try:
                if not state.done and self._await_end(state):
                    # Collecting the ended container and confirming it gone runs no
                    # check: the next check takes the slot meanwhile.
                    slot.close()
                    state = steps.full_poll(self._deps, state)  # FullStopped's work
                if not state.done:
                    self._history.add("TaskTimedOut", taskTimedOutEventDetails=_TIMED_OUT)
                    state = self._task("FullOvertime", steps.full_poll, state)
                else:
                    self._history.exited("Task", "FullStart", to_wire(state))
            except Cancelled as ended:
                if state.handle is not None:
                    self._destroy(state.handle, stopping=isinstance(ended, Stopped))
                raise
        return state.finished()

    def _destroy(self, handle: ContainerHandle, stopping: bool) -> None:
        """A superseded run reports a cleanup it cannot confirm; a stop sweeps after it."""
        try:
            self._deps.containers.destroy(handle)
        except Exception:
            if not stopping:
                raise
            log.exception("destroying %s at the stop failed; the sweep retries", handle.check)

    def _await_end(self, state: FullProgress) -> bool:
        """Until the container ends (True) or its deadline and the wait's margin pass,
        looking for a cancellation every few milliseconds."""
        assert state.handle is not None  # a started check that is not done has its handle
        give_up = state.handle.deadline + WAIT_MARGIN_SECONDS
        while (left := give_up - time.time()) > 0:
            if self._deps.containers.wait(state.handle, min(left, CANCEL_CHECK_SECONDS)):
                return True
            self._ticket.check()
        return False


# The history event of a FullStart whose wait passed its timeout, as Step Functions records it.
_TIMED_OUT = {"error": "States.Timeout", "cause": "The check ran past its timeout."}


def _wait_seconds(item: FullItem) -> int:
    """What the FullChecks map's ItemSelector computes: the check's timeout and the margin."""
    return item.check.timeout_seconds + WAIT_MARGIN_SECONDS
