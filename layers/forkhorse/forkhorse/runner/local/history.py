"""Execution history shaped like Step Functions' GetExecutionHistory, for local runs.

The console draws a run's graph from these events whether they came from AWS or from the
local supervisor. Each event is appended to a file as one JSON line, so writing an event
costs the same whatever the history's length (rewriting the whole history for each event
made an hour-long check's polls quadratic in disk writes), and a reader in another thread or
process sees every whole line (a line still being written is left for the next read).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from forkhorse.domain.receipts import format_timestamp
from forkhorse.ports.clock import Clock

HISTORY_SUFFIX = ".jsonl"
# Before histories were appended line by line, each was one JSON document.
_WHOLE_DOCUMENT_SUFFIX = ".json"
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
        self._count = len(read_history(path))
        self._lock = threading.Lock()

    @property
    def events(self) -> list[dict[str, Any]]:
        return read_history(self._path)

    def add(self, event_type: str, **details: Any) -> None:
        with self._lock:
            event: dict[str, Any] = {
                "id": self._count + 1,
                "previousEventId": self._count,
                "timestamp": format_timestamp(self._clock.now()),
                "type": event_type,
                **details,
            }
            self._append(event)
            self._count += 1

    def entered(self, kind: str, name: str, state_input: Any) -> None:
        self.add(
            _ENTERED[kind], stateEnteredEventDetails={"name": name, "input": _brief(state_input)}
        )

    def exited(self, kind: str, name: str, output: Any) -> None:
        self.add(_EXITED[kind], stateExitedEventDetails={"name": name, "output": _brief(output)})

    def _append(self, event: dict[str, Any]) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._path.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(event, separators=(",", ":")) + "\n")


def read_history(path: Path) -> list[dict[str, Any]]:
    """A persisted history's events, one JSON line each; empty when the execution left none.
    A last line without its newline is still being written, and is not read yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _read_whole_document(path.with_suffix(_WHOLE_DOCUMENT_SUFFIX))
    whole = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in whole.splitlines()]


def _read_whole_document(path: Path) -> list[dict[str, Any]]:
    try:
        events: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["events"]
    except FileNotFoundError:
        return []
    return events
