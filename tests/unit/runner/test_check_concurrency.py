"""The machine's concurrency bounds sandboxes and containers together (runner/local/scheduler.py).

Fake receipt runs (three quick checks then one full check, as the throughput bench's) count
the checks that hold a slot at once; every wait is bounded in count and time."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
from forkhorse.domain.limits import QueueLimits, queue_for_concurrency
from forkhorse.runner.local.scheduler import QUICK_EXTRA_SLOTS, FairScheduler, Job, LaneName, Ticket

STEPS: tuple[LaneName, ...] = ("quick", "quick", "quick", "full")
GATE_SECONDS = 60.0
POLL_SECONDS = 0.01


def eventually(predicate: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    for _ in range(int(seconds / POLL_SECONDS)):
        if predicate():
            return
        time.sleep(POLL_SECONDS)
    raise AssertionError(f"{what}: not seen within {seconds:.0f} s")


class CountingChecks:
    """Counts the checks running at once, in all and per lane, and their peaks."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self._lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.ended = 0

    def body(self, ticket: Ticket) -> None:
        for lane in STEPS:
            with ticket.slot(lane):
                self.count(lane, +1)
                self.gate.wait(GATE_SECONDS)
                self.count(lane, -1)
        with self._lock:
            self.ended += 1

    def count(self, lane: str, change: int) -> None:
        with self._lock:
            for kind in (lane, "checks"):
                self.now[kind] += change
                self.peak[kind] = max(self.peak[kind], self.now[kind])

    def running(self, kind: str) -> int:
        with self._lock:
            return self.now[kind]


@pytest.mark.parametrize("concurrency", [1, 2, 3])
def test_never_more_checks_at_once_than_the_machines_concurrency(concurrency: int) -> None:
    limits = queue_for_concurrency(concurrency)
    scheduler = FairScheduler(limits)
    checks = CountingChecks()
    runs = 20  # the throughput bench's reviews, in one project, each its own agent
    try:
        for index in range(runs):
            scheduler.submit(Job(f"run-{index}", "project", f"agent-{index}", False), checks.body)
        # The machine fills up to its concurrency, and no further while the checks hold.
        eventually(lambda: checks.running("checks") == concurrency, "the machine full")
        time.sleep(0.2)  # a scheduler that over-admits would do so now
        assert checks.running("checks") == concurrency
        checks.gate.set()
        eventually(lambda: checks.ended == runs, "every run ended")
    finally:
        checks.gate.set()
        scheduler.shutdown()
    assert concurrency <= checks.peak["checks"] <= concurrency + QUICK_EXTRA_SLOTS
    assert checks.peak["full"] <= concurrency
    assert checks.peak["quick"] <= limits.quick_slots


def test_full_checks_fill_the_machine_and_only_one_quick_check_runs_beside_them() -> None:
    """Two checks at once: two full checks fill the machine; one quick check (short and
    small) still runs beside them, so another project is not stalled, and the next waits."""
    # One project may hold both full slots here (by default it holds one of two, see
    # tests/hostile/test_full_slots.py): this is about the machine's slots, not shares.
    limits = QueueLimits(running_per_project=4, check_slots=2, full_slots_per_project=2)
    scheduler = FairScheduler(limits)
    checks = CountingChecks()

    def one_check(lane: LaneName) -> Callable[[Ticket], None]:
        def body(ticket: Ticket) -> None:
            with ticket.slot(lane):
                checks.count(lane, +1)
                checks.gate.wait(GATE_SECONDS)
                checks.count(lane, -1)

        return body

    try:
        for index in range(2):
            scheduler.submit(Job(f"f{index}", "busy", f"agent-f{index}", False), one_check("full"))
        eventually(lambda: checks.running("full") == 2, "two full checks running")
        for index in range(2):
            job = Job(f"q{index}", "other", f"agent-q{index}", False)
            scheduler.submit(job, one_check("quick"))
        eventually(lambda: checks.running("quick") == 1, "one quick check beside them")
        time.sleep(0.2)  # a scheduler that over-admits would do so now
        assert (checks.running("quick"), checks.running("checks")) == (1, 3)
    finally:
        checks.gate.set()
        scheduler.shutdown()
    assert checks.peak["checks"] == 2 + QUICK_EXTRA_SLOTS


def test_a_slot_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairScheduler(QueueLimits(check_slots=0))
