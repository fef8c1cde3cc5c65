"""Fair scheduling of local receipt runs.

Two levels, so one busy project cannot hold up another:

- Admission. A queued run becomes active when its agent and its project are under their
  running limits. Among eligible runs the least recently admitted project goes first, then
  its least recently admitted agent, then the oldest run. Before-promote runs skip the queue
  and every limit: they are admitted at once (the project's workflow lease already allows
  only one per project). An agent may keep only so many review runs waiting.
- Lanes. An active run takes a slot of the quick lane for each quick check and a slot of the
  full lane for each full check, and gives it back after. A freed slot goes to a
  before-promote run first, then to the project holding the fewest slots of that lane, then
  to the least recently served one. Each lane keeps reserved slots only before-promote runs
  may use, so they never wait behind review runs.
- Shares. One project's review runs hold at most `full_slots_per_project` full slots
  (max(1, N - 1) of N): with two or more, a slot is always out of one project's reach, so
  another project's full check starts when it is queued, however long the first project's
  checks run (an agent has one run at a time, so it holds at most one full slot).

Because quick checks hold the quick lane one check at a time and full checks never take it,
another project's quick check waits at most for the quick checks already in progress (one
quick check's time, bounded by the sandbox deadline), never for a full check.

A stop (`stop`) ends every active run at its next step with `Stopped`, and a run waiting for
a slot at once: the service is shutting down and drains.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from forkhorse.domain.limits import QueueLimits

LaneName = Literal["quick", "full"]
Cancel = Literal["queued", "running"]


class Cancelled(Exception):
    """The run was superseded: it stops at its next step."""


class Stopped(Cancelled):
    """The service is stopping: the run ends at its next step as an infrastructure error."""


class QueueFull(Exception):
    """The agent already has as many runs waiting as it may."""


@dataclass(frozen=True)
class Job:
    """What the scheduler knows of one run."""

    key: str  # the execution's generation
    project: str
    agent: str
    priority: bool  # before-promote: ahead of every review run


@dataclass(frozen=True)
class _Entry:
    job: Job
    body: Callable[[Ticket], None]
    arrival: int


class _Recency:
    """When each name was last served; never served ranks first."""

    def __init__(self, counter: Iterator[int]) -> None:
        self._counter = counter
        self._last: dict[str, int] = {}

    def of(self, name: str) -> int:
        return self._last.get(name, -1)

    def served(self, name: str) -> None:
        self._last[name] = next(self._counter)


# A job waiting for a slot: the job, its arrival, and the extra slots open to it.
type _Waiter = tuple[Job, int, int]
# Quick checks are short and small (QUICK_SANDBOX): one may run beyond the machine's slots,
# so full checks filling the machine delay another project's quick check by nothing.
QUICK_EXTRA_SLOTS = 1


class Lane:
    """A fixed number of slots handed out fairly: priority first, then the project holding the
    fewest, then the least recent project. `per_project` bounds what one project's review
    runs hold at once (before-promote runs are not counted)."""

    def __init__(self, shared: int, reserved: int, per_project: int | None = None) -> None:
        self._shared = shared
        self._reserved = reserved
        self._per_project = per_project
        self._in_use = 0
        self._held: Counter[str] = Counter()  # slots held by each project's review runs
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()
        self._recency = _Recency(itertools.count())
        self._changed = threading.Condition()

    @property
    def in_use(self) -> int:
        with self._changed:
            return self._in_use

    def held_by(self, project: str) -> int:
        """Slots `project`'s review runs hold now."""
        with self._changed:
            return self._held[project]

    def acquire(self, job: Job, interrupted: Callable[[], None], extra: int = 0) -> None:
        """Wait for a slot; `extra` slots beyond the shared ones are open to this caller.
        `interrupted` raises when the caller must stop waiting (cancelled or stopping)."""
        with self._changed:
            waiter = (job, next(self._arrivals), extra)
            self._waiting.append(waiter)
            try:
                while self._next() != waiter:
                    interrupted()
                    self._changed.wait()
            finally:
                self._waiting.remove(waiter)
            self._in_use += 1
            if not job.priority:
                self._held[job.project] += 1
            self._recency.served(job.project)
            self._changed.notify_all()

    def release(self, job: Job) -> None:
        with self._changed:
            self._in_use -= 1
            if not job.priority:
                self._held[job.project] -= 1
                if self._held[job.project] == 0:
                    del self._held[job.project]  # keep the counter bounded
            self._changed.notify_all()

    def wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _fits(self, waiter: _Waiter) -> bool:
        job, _, extra = waiter
        if job.priority:
            return self._in_use < self._shared + extra + self._reserved
        if self._per_project is not None and self._held[job.project] >= self._per_project:
            return False
        return self._in_use < self._shared + extra

    def _next(self) -> _Waiter | None:
        fitting = [waiter for waiter in self._waiting if self._fits(waiter)]
        return min(fitting, key=self._rank, default=None)

    def _rank(self, waiter: _Waiter) -> tuple[bool, int, int, int]:
        job, arrival, _ = waiter
        return (not job.priority, self._held[job.project], self._recency.of(job.project), arrival)


class Ticket:
    """An active run's handle: its lane slots and its cancellation."""

    def __init__(self, job: Job, lanes: dict[LaneName, Lane], checks: Lane) -> None:
        self.job = job
        self._lanes = lanes
        self._checks = checks
        self._cancelled = threading.Event()
        self._stopped = False

    def check(self) -> None:
        """Raise `Stopped` when the service stops, `Cancelled` when the run was superseded."""
        if self._cancelled.is_set():
            raise Stopped() if self._stopped else Cancelled()

    @property
    def stopped(self) -> bool:
        return self._stopped

    @contextmanager
    def slot(self, name: LaneName) -> Iterator[None]:
        """A slot of the check's lane, then one of the machine's: sandboxes and containers
        together never exceed the machine's concurrency, but for one quick check."""
        extra = QUICK_EXTRA_SLOTS if name == "quick" else 0
        with self._held(self._lanes[name]), self._held(self._checks, extra):
            yield

    @contextmanager
    def _held(self, lane: Lane, extra: int = 0) -> Iterator[None]:
        lane.acquire(self.job, self.check, extra)
        try:
            yield
        finally:
            lane.release(self.job)

    def stop(self) -> None:
        """The service is stopping: the run ends at its next step (see `Stopped`)."""
        self._stopped = True
        self.cancel()

    def cancel(self) -> None:
        self._cancelled.set()
        for lane in (*self._lanes.values(), self._checks):
            lane.wake()


class FairScheduler:
    """Admits queued runs under the limits and runs each active one on its own thread."""

    def __init__(self, limits: QueueLimits) -> None:
        if (
            min(
                limits.running_per_project,
                limits.running_per_agent,
                limits.running_total,
                limits.quick_slots,
                limits.full_slots,
                limits.full_slots_per_project,
                limits.check_slots,
            )
            < 1
        ):
            raise ValueError("every running limit and slot count must be at least 1")
        self._limits = limits
        self.lanes: dict[LaneName, Lane] = {
            "quick": Lane(limits.quick_slots, limits.promote_slots),
            "full": Lane(limits.full_slots, limits.promote_slots, limits.full_slots_per_project),
        }
        self.checks = Lane(limits.check_slots, limits.promote_slots)
        self._lock = threading.Lock()
        self._queued: list[_Entry] = []
        self._active: dict[str, tuple[Ticket, threading.Thread]] = {}
        self._running_projects: Counter[str] = Counter()
        self._running_agents: Counter[str] = Counter()
        self._queued_agents: Counter[str] = Counter()
        self._arrivals = itertools.count()
        self._admissions = itertools.count()
        self._projects = _Recency(self._admissions)
        self._agents = _Recency(self._admissions)
        self._closed = False
        self._held = False  # while recovery removes orphans, nothing is admitted

    # --- what callers do ------------------------------------------------------------------

    def submit(self, job: Job, body: Callable[[Ticket], None]) -> None:
        """Queue `job`; `body` runs on its own thread once admitted. Raises `QueueFull`."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the scheduler is shut down")
            if not job.priority and self._queued_agents[job.agent] >= self._limits.queued_per_agent:
                raise QueueFull(
                    f"Refused: this agent already has {self._limits.queued_per_agent} receipt "
                    "runs waiting; request again when one has started."
                )
            self._queued.append(_Entry(job, body, next(self._arrivals)))
            if not job.priority:
                self._queued_agents[job.agent] += 1
            self._dispatch()

    def cancel(self, key: str) -> Cancel | None:
        """Cancel a run: a queued one never starts, an active one stops at its next step."""
        with self._lock:
            for entry in self._queued:
                if entry.job.key == key:
                    self._unqueue(entry)
                    return "queued"
            active = self._active.get(key)
        if active is None:
            return None
        active[0].cancel()
        return "running"

    def hold(self) -> None:
        """Admit nothing until `release`: queued runs wait (recovery is removing orphans)."""
        with self._lock:
            self._held = True

    def release(self) -> None:
        with self._lock:
            self._held = False
            self._dispatch()

    def active_keys(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._active)

    def queued_of(self, agent: str) -> int:
        with self._lock:
            return self._queued_agents[agent]

    def shutdown(self, timeout_seconds: float | None = None) -> tuple[list[Job], list[Job]]:
        """Drop queued runs and wait for active ones to end, at most `timeout_seconds`.
        Returns the dropped runs (never started) and the runs still active at the deadline."""
        with self._lock:
            self._closed = True
            dropped = [entry.job for entry in self._queued]
            for entry in list(self._queued):
                self._unqueue(entry)
            active = list(self._active.values())
        give_up = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        for _, thread in active:
            thread.join(None if give_up is None else max(0.0, give_up - time.monotonic()))
        return dropped, [ticket.job for ticket, thread in active if thread.is_alive()]

    def stop(self) -> None:
        """Admit nothing more, and end every active run at its next step (`Stopped`)."""
        with self._lock:
            self._closed = True
            tickets = [ticket for ticket, _ in self._active.values()]
        for ticket in tickets:
            ticket.stop()

    # --- admission ------------------------------------------------------------------------

    def _unqueue(self, entry: _Entry) -> None:
        self._queued.remove(entry)
        if not entry.job.priority:
            self._queued_agents[entry.job.agent] -= 1
            if self._queued_agents[entry.job.agent] == 0:
                del self._queued_agents[entry.job.agent]  # keep the counter bounded

    def _eligible(self, job: Job) -> bool:
        if job.priority:
            return True
        return (
            self._running_projects[job.project] < self._limits.running_per_project
            and self._running_agents[job.agent] < self._limits.running_per_agent
            and self._reviews_active() < self._limits.running_total
        )

    def _reviews_active(self) -> int:
        return sum(not ticket.job.priority for ticket, _ in self._active.values())

    def _rank(self, entry: _Entry) -> tuple[bool, int, int, int]:
        job = entry.job
        return (
            not job.priority,
            self._projects.of(job.project),
            self._agents.of(job.agent),
            entry.arrival,
        )

    def _dispatch(self) -> None:
        """Admit eligible runs, best first, until none is eligible. Holds the lock."""
        while not (self._closed or self._held):
            eligible = [entry for entry in self._queued if self._eligible(entry.job)]
            if not eligible:
                return
            best = min(eligible, key=self._rank)
            self._unqueue(best)
            self._admit(best.job, best.body)

    def _admit(self, job: Job, body: Callable[[Ticket], None]) -> None:
        self._projects.served(job.project)
        self._agents.served(job.agent)
        if not job.priority:
            self._running_projects[job.project] += 1
            self._running_agents[job.agent] += 1
        ticket = Ticket(job, self.lanes, self.checks)
        thread = threading.Thread(
            target=self._drive, args=(ticket, body), name=f"receipt-run-{job.key}", daemon=True
        )
        self._active[job.key] = (ticket, thread)
        thread.start()

    def _drive(self, ticket: Ticket, body: Callable[[Ticket], None]) -> None:
        try:
            body(ticket)
        finally:
            with self._lock:
                self._finished(ticket.job)
                self._dispatch()

    def _finished(self, job: Job) -> None:
        del self._active[job.key]
        if not job.priority:
            self._running_projects[job.project] -= 1
            self._running_agents[job.agent] -= 1
