"""Execution history shaped like Step Functions' GetExecutionHistory, for local runs.

The console draws a run's graph from these events whether they came from AWS or from the
local supervisor. Each event is written through to a JSON file, atomically, so a reader in
another thread or process always sees a whole history.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from forkhorse.domain.receipts import format_timestamp
from forkhorse.ports.clock import Clock

# Event details are for operators: keep them small and free of logs.
MAX_DETAIL_CHARS = 2048

_ENTERED = {"Task": "TaskStateEntered", "Map": "MapStateEntered", "Choice": "ChoiceStateEntered"}
_EXITED = {"Task": "TaskStateExited", "Map": "MapStateExited", "Choice": "ChoiceStateExited"}


def _brief(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 3] + "..."


class ExecutionHistory:
    """Appends events for one execution and persists them at `path`."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self._path = path
        self._clock = clock
        # A resumed execution (a promote after a restart) continues its history.
        self._events: list[dict[str, Any]] = read_history(path)
        self._lock = threading.Lock()

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def add(self, event_type: str, **details: Any) -> None:
        with self._lock:
            event: dict[str, Any] = {
                "id": len(self._events) + 1,
                "previousEventId": len(self._events),
                "timestamp": format_timestamp(self._clock.now()),
                "type": event_type,
                **details,
            }
            self._events.append(event)
            self._write()

    def entered(self, kind: str, name: str, state_input: Any) -> None:
        self.add(
            _ENTERED[kind], stateEnteredEventDetails={"name": name, "input": _brief(state_input)}
        )

    def exited(self, kind: str, name: str, output: Any) -> None:
        self.add(_EXITED[kind], stateExitedEventDetails={"name": name, "output": _brief(output)})

    def _write(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self._path.parent, prefix=".history-")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump({"events": self._events}, stream)
        os.replace(temporary, self._path)


def read_history(path: Path) -> list[dict[str, Any]]:
    """A persisted history's events; empty when the execution left none."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    events: list[dict[str, Any]] = document["events"]
    return events
