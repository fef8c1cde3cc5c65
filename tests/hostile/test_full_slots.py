"""Attack: one project's agents hold every full-check slot with checks that only sleep.

A check may declare up to 3,600 s and a run may last 7,200 s, so two agents of one project
that each keep a sleeping full check running (renewed by resubmitting) would hold a two-slot
machine for hours while another project's one-second full check waits. The run queue keeps
one full slot out of any one project's reach (`QueueLimits.full_slots_per_project`,
max(1, N - 1) of N), so the other project's check starts when it is queued.

The scheduler-level tests drive `FairScheduler` with fake steps (orders and counts, never
durations); the last one uses the real local server, podman and busybox, and waits for
events with deadlines far below the sleepers' duration.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.domain.limits import QueueLimits, queue_for_concurrency
from forkhorse.domain.run import RunRef
from forkhorse.runner.local.scheduler import FairScheduler, Job, LaneName

from tests.integration.api.support import checks_files
from tests.integration.containers.helpers import containers_of
from tests.support.fake_steps import FakeSteps
from tests.support.live import Server, new_lane, new_project, start_server
from tests.support.waiting import eventually

SLEEP_SECONDS = 120  # the sleepers; every wait below ends far sooner
START_DEADLINE = 60.0  # the short check's whole run, on a loaded machine
SETTLE_SECONDS = 5.0  # how long a sleeper may take to reach its container, if it may
POLL_SECONDS = 0.05


def _submit(
    scheduler: FairScheduler,
    fake: FakeSteps,
    key: str,
    project: str,
    lanes: list[LaneName],
    priority: bool = False,
) -> None:
    scheduler.submit(Job(key, project, f"agent-{key}", priority), fake.body(key, lanes))


# --- scheduler level ----------------------------------------------------------------------


def test_one_project_holds_all_but_one_full_slot_and_another_starts_at_once(
    fake: FakeSteps,
) -> None:
    scheduler = FairScheduler(queue_for_concurrency(2))
    try:
        for key in ("a1", "a2"):  # two agents of project A, each a long full check
            _submit(scheduler, fake, key, "A", ["full"])
        fake.wait_for("full", "a1", 0)
        fake.wait_for("start", "a2")  # admitted, and waiting for a full slot
        assert scheduler.lanes["full"].held_by("A") == 1
        _submit(scheduler, fake, "b1", "B", ["full"])
        fake.wait_for("full", "b1", 0)  # the slot out of A's reach: at once
        assert not fake.seen("full", "a2", 0)
        fake.release("b1", 0)
        fake.wait_for("end", "b1")
        assert not fake.seen("full", "a2", 0), "A still holds its share"
        fake.release("a1", 0)  # A's first check ends: its second goes next
        fake.wait_for("full", "a2", 0)
    finally:
        fake.release_all()
        scheduler.shutdown()


def test_with_three_slots_one_project_holds_two_and_the_freed_slot_goes_to_the_poorer(
    fake: FakeSteps,
) -> None:
    scheduler = FairScheduler(queue_for_concurrency(3))
    try:
        for key in ("a1", "a2", "a3"):
            _submit(scheduler, fake, key, "A", ["full"])
        fake.wait_for("full", "a1", 0)
        fake.wait_for("full", "a2", 0)
        fake.wait_for("start", "a3")
        assert scheduler.lanes["full"].held_by("A") == 2
        _submit(scheduler, fake, "b1", "B", ["full"])
        fake.wait_for("full", "b1", 0)
        _submit(scheduler, fake, "c1", "C", ["full"])  # every slot held: C waits
        fake.release("a1", 0)  # the freed slot goes to C (holds none), not to A's third
        fake.wait_for("full", "c1", 0)
        assert not fake.seen("full", "a3", 0)
    finally:
        fake.release_all()
        scheduler.shutdown()


def test_a_before_promote_run_is_not_bound_by_its_projects_share(fake: FakeSteps) -> None:
    scheduler = FairScheduler(queue_for_concurrency(2))
    try:
        _submit(scheduler, fake, "a1", "A", ["full"])
        fake.wait_for("full", "a1", 0)
        _submit(scheduler, fake, "promote", "A", ["full"], priority=True)
        fake.wait_for("full", "promote", 0)  # A's share is full; the reserved slot is not
    finally:
        fake.release_all()
        scheduler.shutdown()


def test_a_share_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairScheduler(QueueLimits(full_slots_per_project=0))


# --- the real local server ----------------------------------------------------------------


@pytest.fixture
def two_slot_server(
    tmp_path: Path, busybox_ref: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Server]:
    """A live server on a two-check machine, whatever this one is (the queue's defaults)."""
    for variable in [name for name in os.environ if name.startswith("FORKHORSE_QUEUE_")]:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("FORKHORSE_CONCURRENCY", "2")
    registry = ImageRegistry(tmp_path / "images")
    registry.record("busybox", busybox_ref)
    live, stop = start_server(tmp_path / "home", registry)
    try:
        yield live
    finally:
        stop()


def _run_of(server: Server, project: str, review_id: str) -> RunRef:
    review = server.app.runtime.store.get_review(review_id)
    assert review is not None
    assert review.execution is not None
    return RunRef(
        project_id=project,
        review_id=review_id,
        generation=review.execution.generation,
        trigger=review.execution.trigger,
        commit=review.execution.commit,
    )


def _events(server: Server, run: RunRef) -> list[dict[str, Any]]:
    return server.app.runtime.supervisor.history(run)


def _entered_full_checks(server: Server, run: RunRef) -> bool:
    return any(
        event["type"] == "MapIterationStarted"
        and event["mapIterationStartedEventDetails"]["name"] == "FullChecks"
        for event in _events(server, run)
    )


def _at(events: list[dict[str, Any]], kind: str, name: str | None = None) -> datetime:
    for event in events:
        details = event.get("stateExitedEventDetails") or event.get("stateEnteredEventDetails")
        if event["type"] == kind and (name is None or (details or {}).get("name") == name):
            return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
    raise AssertionError(f"no {kind} {name or ''} in the history")


def _quietly(predicate: Callable[[], object], seconds: float) -> bool:
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if predicate():
            return True
        time.sleep(POLL_SECONDS)
    return bool(predicate())


def _running(runs: list[RunRef]) -> int:
    return sum(bool(containers_of(Podman(), run.generation)) for run in runs)


def test_another_projects_short_full_check_starts_while_sleepers_hold_slots(
    two_slot_server: Server,
) -> None:
    server = two_slot_server
    supervisor = server.app.runtime.supervisor
    busy = new_project(server, False)
    sleepers: list[RunRef] = []
    for name in ("a1", "a2"):  # two agents of one project, a sleeping full check each
        lane = new_lane(busy, name)
        review = lane.request_review(lane.push(checks_files(f"sleep {SLEEP_SECONDS}", quick=False)))
        sleepers.append(_run_of(server, busy.id, review["id"]))
    short: RunRef | None = None
    try:
        eventually(lambda: _running(sleepers) >= 1, "a sleeper's container")
        eventually(
            lambda: all(_entered_full_checks(server, run) for run in sleepers),
            "both sleepers at their full check",
        )
        # Each sleeper holds what the queue gives it: a container if a slot is open to it.
        _quietly(lambda: _running(sleepers) == 2, SETTLE_SECONDS)
        held = _running(sleepers)

        other = new_project(server, False)
        lane = new_lane(other, "b")
        commit = lane.push(checks_files("sleep 1", quick=False))
        queued = time.time()
        short = _run_of(server, other.id, lane.request_review(commit)["id"])
        assert supervisor.wait(short, START_DEADLINE), (
            f"the short full check did not run within {START_DEADLINE:.0f} s while "
            f"{held} sleepers held the full slots"
        )
        events = _events(server, short)
        started = _at(events, "TaskStateExited", "FullStart").timestamp() - queued
        print(f"\nshort check's container started {started:.2f} s after it was queued")
        assert server.owner.review(other.id, short.review_id)["receipt"]["status"] == "passed"
        assert _running(sleepers) >= 1, "a sleeper still runs: the short check did not wait"
        assert held == 1, "one project held every full slot"
    finally:
        for run in sleepers + ([short] if short is not None else []):
            supervisor.cancel_run(run)
        for run in sleepers:
            assert supervisor.wait(run, START_DEADLINE), "a cancelled sleeper did not stop"
    every = sleepers + ([short] if short is not None else [])
    eventually(lambda: _running(every) == 0, "every container gone")
