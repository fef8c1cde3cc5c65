"""The local supervisor: runs ReceiptRun's states in the state machine's order, on threads.

It is the local stand-in for Step Functions. It calls the same step functions with the same
JSON, follows the same choices (discovery, the quick gate, the full poll loop) and routes any
unexpected failure to the infrastructure-error finalizer, as the state machine's Catch does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from forkhorse.domain.model import InvalidatedExecution
from forkhorse.domain.run import RunRef
from forkhorse.runner import steps
from forkhorse.runner.history import ExecutionHistory, read_history

log = logging.getLogger(__name__)

Step = Callable[[steps.RunnerDeps, dict[str, Any]], dict[str, Any]]


class LocalSupervisor:
    """Runs receipt executions in the background and records their histories."""

    def __init__(
        self,
        deps: steps.RunnerDeps,
        quick_deps: steps.QuickDeps,
        history_dir: Path,
        workers: int = 2,
        cleanup: Callable[[str], None] | None = None,
    ) -> None:
        self._deps = deps
        self._quick_deps = quick_deps
        self._history_dir = history_dir
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="receipt-run")
        self._runs: dict[str, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._cleanup = cleanup

    # --- lifecycle --------------------------------------------------------------------

    def recover(self) -> list[InvalidatedExecution]:
        """After a restart: interrupted runs become infrastructure errors, orphans go."""
        invalidated = self._deps.store.invalidate_running(self._deps.clock.now())
        removed = self._deps.containers.cleanup_orphans(frozenset())
        if invalidated or removed:
            log.warning(
                "recovered %d interrupted runs, removed %d orphan containers",
                len(invalidated),
                len(removed),
            )
        return invalidated

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    # --- the Orchestrator port ----------------------------------------------------------

    def start_run(self, run: RunRef) -> str:
        with self._lock:
            if run.generation in self._runs:
                raise ValueError("this generation has already started")
            self._runs[run.generation] = self._executor.submit(self._execute, run)
        return run.generation

    def wait(self, run: RunRef, timeout_seconds: float) -> bool:
        with self._lock:
            future = self._runs.get(run.generation)
        if future is None:
            return True
        try:
            future.result(timeout=timeout_seconds)
        except TimeoutError:
            return False
        return True

    def history(self, run: RunRef) -> list[dict[str, Any]]:
        return read_history(self._history_path(run.generation))

    # --- one execution ------------------------------------------------------------------

    def _history_path(self, generation: str) -> Path:
        return self._history_dir / f"{generation}.json"

    def _execute(self, run: RunRef) -> dict[str, Any]:
        history = ExecutionHistory(self._history_path(run.generation), self._deps.clock)
        state: dict[str, Any] = {"run": run.model_dump(mode="json")}
        history.add("ExecutionStarted", executionStartedEventDetails={"input": str(state)})
        try:
            output = _Execution(self._deps, self._quick_deps, history, state).run()
        except Exception:
            log.exception("receipt run %s failed on infrastructure", run.generation)
            error_input = {"run": state["run"], "infrastructureError": True}
            output = _task(
                self._deps, history, "FinalizeInfrastructureError", steps.finalize, error_input
            )
        finally:
            if self._cleanup is not None:
                self._cleanup(run.generation)
        history.add("ExecutionSucceeded", executionSucceededEventDetails={"output": str(output)})
        return output


def _task(
    deps: steps.RunnerDeps, history: ExecutionHistory, name: str, step: Step, state: dict[str, Any]
) -> dict[str, Any]:
    history.entered("Task", name, state)
    output = step(deps, state)
    history.exited("Task", name, output)
    return output


class _Execution:
    """The state machine's path through one run, mirroring receipt_run.asl.json."""

    def __init__(
        self,
        deps: steps.RunnerDeps,
        quick_deps: steps.QuickDeps,
        history: ExecutionHistory,
        state: dict[str, Any],
    ) -> None:
        self._deps = deps
        self._quick_deps = quick_deps
        self._history = history
        self._state = state

    def run(self) -> dict[str, Any]:
        state = self._state
        state["prepared"] = self._task("Prepare", steps.prepare, state)
        if state["prepared"]["discovery"] == "checks":
            self._checks()
        return self._task("Finalize", steps.finalize, state)

    def _task(self, name: str, step: Step, state: dict[str, Any]) -> dict[str, Any]:
        return _task(self._deps, self._history, name, step, state)

    def _checks(self) -> None:
        state = self._state
        prepared = state["prepared"]
        if prepared["quickCount"] > 0:
            state["quick"] = self._map("QuickChecks", prepared["quick"], self._quick)
            closed = not all(item["passed"] for item in state["quick"])
            self._choice("QuickGate", {"closed": closed})
            if closed:
                return
        state["full"] = self._map("FullChecks", prepared["full"], self._full)

    def _choice(self, name: str, decision: dict[str, Any]) -> None:
        self._history.entered("Choice", name, decision)
        self._history.exited("Choice", name, decision)

    def _map(
        self,
        name: str,
        items: list[dict[str, Any]],
        iteration: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> list[dict[str, Any]]:
        self._history.entered("Map", name, {"items": len(items)})
        results = []
        for index, check in enumerate(items):
            self._history.add(
                "MapIterationStarted",
                mapIterationStartedEventDetails={"name": name, "index": index},
            )
            results.append(iteration({"run": self._state["run"], "check": check}))
            self._history.add(
                "MapIterationSucceeded",
                mapIterationSucceededEventDetails={"name": name, "index": index},
            )
        self._history.exited("Map", name, results)
        return results

    def _quick(self, item: dict[str, Any]) -> dict[str, Any]:
        self._history.entered("Task", "QuickCheck", item)
        dropped = steps.quick(self._quick_deps, item)
        self._history.exited("Task", "QuickCheck", dropped)
        return self._task("QuickRecord", steps.quick_record, dropped)

    def _full(self, item: dict[str, Any]) -> dict[str, Any]:
        name = item["check"]["name"]
        state = self._task("FullStart", steps.full_start, item)
        while not state["done"]:
            time.sleep(state["pollSeconds"])
            state = self._task("FullPoll", steps.full_poll, state)
        return {"name": name, "outcome": state["outcome"], "result": state["result"]}
