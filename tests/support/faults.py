"""Crash points: a proxy that fails or kills the process before or after a port's Nth write.

`Faulty(target, plan)` stands in for any object implementing a port (the Store, a GitStore,
a Snapshot, the PromoteJournal). Its methods are classified from the port Protocol by their
leading verb; `unclassified` names any port method neither list knows, so a new write
method cannot slip past the campaign unnoticed (a test asserts it is empty).

Every object wrapped with one `FaultPlan` shares its write count: the plan logs each write
(index, method, phase) to a file, flushed before the write runs, so a recording run
enumerates the path's writes and a killed run shows where it died.
"""

from __future__ import annotations

import inspect
import os
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

# A port method changes state iff its name starts with one of these verbs...
WRITE_VERBS = frozenset(
    {
        "acquire",
        "add",
        "append",
        "approve",
        "arm",
        "attach",
        "begin",
        "claim",
        "create",
        "delete",
        "discard",
        "drop",
        "export",
        "intend",
        "invalidate",
        "publish",
        "put",
        "record",
        "release",
        "renew",
        "request",
        "retarget",
        "revoke",
        "set",
        "settle",
        "start",
        "update",
    }
)
# ...and only reads (or closes) iff it starts with one of these.
READ_VERBS = frozenset(
    {
        "check",
        "close",
        "commit",
        "done",
        "exists",
        "find",
        "entries",
        "get",
        "head",
        "index",
        "intents",
        "is",
        "last",
        "latest",
        "ledger",
        "list",
        "live",
        "open",
        "project",
        "published",
        "read",
        "reader",
        "refs",
        "stale",
        "store",
        "tree",
        "unfinished",
    }
)

Phase = Literal["before", "after"]
Mode = Literal["raise", "kill"]
PHASES: tuple[Phase, ...] = ("before", "after")
# The marker of a crash point whose step-and-write pair an earlier point of its path already
# covers: `make test` leaves it to `make test-faults`, which runs the whole campaign.
REPEATED = "campaign"


@dataclass(frozen=True)
class PathWrite:
    """One write of a path, as `Faulty` names it, and the step that makes it."""

    write: str
    step: str


def crash_points(path: Sequence[PathWrite]) -> list[Any]:
    """`(index, phase)` parameters for every write of `path` in both phases, marked
    `campaign` where the same step made the same write earlier on the path, and for every
    write but the first before it lands: a crash there leaves the writes a crash after the
    previous one leaves (only writes the campaign does not count, such as an envelope or a
    tile, tell them apart), so `make test` runs the after phase and CI runs both."""
    seen: set[PathWrite] = set()
    points = []
    for index, point in enumerate(path):
        repeated = point in seen
        seen.add(point)
        for phase in PHASES:
            campaign = repeated or (phase == "before" and index > 0)
            marks = [getattr(pytest.mark, REPEATED)] if campaign else []
            name = f"{index:02d}-{point.write}-{phase}"
            points.append(pytest.param(index, phase, marks=marks, id=name))
    return points


def port_methods(port: type) -> list[str]:
    """The public members a port Protocol declares (methods and properties), its own and
    those of the ports it composes (the Store is one port per aggregate)."""
    return sorted(
        {
            name
            for declaring in port.__mro__
            for name, member in vars(declaring).items()
            if not name.startswith("_") and (callable(member) or isinstance(member, property))
        }
    )


def verb(method: str) -> str:
    return method.split("_", 1)[0]


def is_write(method: str) -> bool:
    return verb(method) in WRITE_VERBS


def unclassified(port: type) -> list[str]:
    """Port members whose verb is in neither list, or in both."""
    return [
        name
        for name in port_methods(port)
        if (verb(name) in WRITE_VERBS) == (verb(name) in READ_VERBS)
    ]


class InjectedFault(Exception):
    """The fault a raise-mode plan injects at its crash point."""


@dataclass(frozen=True)
class CrashPoint:
    index: int  # the Nth write of the path, from 0
    phase: Phase
    mode: Mode = "kill"

    @property
    def id(self) -> str:
        return f"{self.index:03d}-{self.phase}"


@dataclass
class FaultPlan:
    """Counts writes once `armed`; at `crash` it raises or kills the process."""

    log: Path | None = None
    crash: CrashPoint | None = None
    armed: bool = False
    writes: list[str] = field(default_factory=list)
    fired: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, name: str, real: Callable[[], Any]) -> Any:
        with self._lock:
            index = len(self.writes) if self.armed else None
            if index is not None:
                self.writes.append(name)
                self._log(f"{index} {name}")
        if index is not None:
            self._maybe_fail(index, "before")
        result = real()
        if index is not None:
            self._maybe_fail(index, "after")
        return result

    def _maybe_fail(self, index: int, phase: Phase) -> None:
        crash = self.crash
        if crash is None or self.fired or (crash.index, crash.phase) != (index, phase):
            return
        self.fired = True
        self._log(f"crash {index} {phase} {self.writes[index]}")
        if crash.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFault(f"injected fault {phase} write {index} ({self.writes[index]})")

    def _log(self, line: str) -> None:
        if self.log is None:
            return
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())


class Faulty:
    """A port object whose writes go through `plan`; reads pass straight through.

    `open_snapshot` and `store` return wrapped objects, so the snapshots a run exports
    and the per-project git stores count their writes too."""

    _WRAPS_RESULT = frozenset({"open_snapshot", "store"})

    def __init__(self, target: object, plan: FaultPlan) -> None:
        self._target = target
        self._plan = plan

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._target, name)
        if not callable(member) or name.startswith("_") or inspect.isclass(member):
            return member
        if name in self._WRAPS_RESULT:
            return lambda *args, **kwargs: Faulty(member(*args, **kwargs), self._plan)
        if not is_write(name):
            return member
        return lambda *args, **kwargs: self._plan.call(
            f"{type(self._target).__name__}.{name}", lambda: member(*args, **kwargs)
        )


def read_log(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def logged_writes(path: Path) -> list[str]:
    """The write names a run logged, in order."""
    return [line.split(" ", 1)[1] for line in read_log(path) if not line.startswith("crash ")]
