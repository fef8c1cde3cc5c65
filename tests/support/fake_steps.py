"""Fake receipt runs for `FairScheduler` tests: each step holds a slot of its lane until
the test releases it, and every start, step entered and end is logged in order, so tests
assert order and concurrency, never durations."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from forkhorse.runner.local.scheduler import LaneName, Ticket

from tests.support.waiting import eventually

GATE_SECONDS = 60.0  # a fake step never blocks longer, even if a test fails first


class FakeSteps:
    """Fake receipt runs: each step holds a slot of its lane until the test releases it.
    Every start, step entered and end is logged in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, int]] = []
        self._gates: dict[tuple[str, int], threading.Event] = {}
        self._lock = threading.Lock()
        self._open = False  # once everything is released, later steps pass at once

    def body(self, key: str, lanes: list[LaneName]) -> Callable[[Ticket], None]:
        def run(ticket: Ticket) -> None:
            self._note("start", key, -1)
            for index, lane in enumerate(lanes):
                with ticket.slot(lane):
                    self._note(lane, key, index)
                    self._gate(key, index).wait(GATE_SECONDS)
            self._note("end", key, -1)

        return run

    def release(self, key: str, index: int) -> None:
        self._gate(key, index).set()

    def release_all(self) -> None:
        with self._lock:
            self._open = True
            for gate in self._gates.values():
                gate.set()

    def seen(self, kind: str, key: str, index: int = -1) -> bool:
        with self._lock:
            return (kind, key, index) in self.log

    def wait_for(self, kind: str, key: str, index: int = -1) -> None:
        eventually(lambda: self.seen(kind, key, index), f"{kind} {key} {index}")

    def _gate(self, key: str, index: int) -> threading.Event:
        with self._lock:
            gate = self._gates.setdefault((key, index), threading.Event())
            if self._open:
                gate.set()
            return gate

    def _note(self, kind: str, key: str, index: int) -> None:
        with self._lock:
            self.log.append((kind, key, index))


@pytest.fixture
def fake() -> Iterator[FakeSteps]:
    steps = FakeSteps()
    yield steps
    steps.release_all()
