"""Attack 6: one agent stalls every project's receipts.

Scheduler-level tests drive `FairScheduler` with fake steps (each step blocks in its lane
until the test releases it) and assert order and concurrency, never durations. The
integration tests use the real local runtime (bubblewrap, podman, busybox) and the real
server.
"""

from __future__ import annotations

import json
import threading
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.adapters.step_functions import StepFunctionsOrchestrator
from forkhorse.domain.limits import QueueLimits
from forkhorse.domain.receipts import running_summary
from forkhorse.domain.run import RunRef
from forkhorse.ports.clock import SystemClock
from forkhorse.runner.local.scheduler import FairScheduler, Job, LaneName, QueueFull, Ticket
from forkhorse.wiring.local import build_local_runtime, queue_limits

from tests.integration.api.support import checks_files
from tests.integration.containers.helpers import containers_of
from tests.integration.runner.scenarios import checks_file, full
from tests.integration.runner.test_faults import _start_crash_worker
from tests.support.fake_steps import GATE_SECONDS, FakeSteps
from tests.support.live import Server, new_lane, new_project
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.runner import World, running_world
from tests.support.waiting import eventually

POLL_SECONDS = 0.02
RUN_SECONDS = 90.0


# --- scheduler level, with fake steps --------------------------------------------------


def _submit(
    scheduler: FairScheduler,
    fake: FakeSteps,
    key: str,
    project: str,
    agent: str,
    lanes: list[LaneName],
    priority: bool = False,
) -> None:
    scheduler.submit(Job(key, project, agent, priority), fake.body(key, lanes))


def test_a_busy_project_delays_another_projects_quick_check_by_one_quick_step(
    fake: FakeSteps,
) -> None:
    scheduler = FairScheduler(QueueLimits(running_per_project=1, quick_slots=1, full_slots=1))
    for key in ("a1", "a2", "a3"):  # three agents of project A, each a long run
        _submit(scheduler, fake, key, "A", f"agent-{key}", ["quick", "quick", "full"])
    fake.wait_for("quick", "a1", 0)  # a1 holds the only quick slot
    _submit(scheduler, fake, "b1", "B", "agent-b", ["quick"])
    fake.wait_for("start", "b1")
    assert not fake.seen("start", "a2")
    assert not fake.seen("start", "a3")
    fake.release("a1", 0)  # one quick step ends: B's quick check goes next, not A's
    fake.wait_for("quick", "b1", 0)
    assert not fake.seen("quick", "a1", 1)
    fake.release("b1", 0)
    fake.wait_for("end", "b1")
    fake.wait_for("quick", "a1", 1)
    fake.release("a1", 1)
    fake.wait_for("full", "a1", 2)  # a1's long full check holds the only full slot...
    _submit(scheduler, fake, "b2", "B", "agent-b", ["quick"])
    fake.wait_for("quick", "b2", 0)  # ...and never the quick lane
    assert not fake.seen("end", "a1")
    assert not fake.seen("start", "a2")
    fake.release_all()
    scheduler.shutdown()


def test_running_limits_per_project_and_agent_are_never_exceeded() -> None:
    limits = QueueLimits()
    scheduler = FairScheduler(limits)
    gate = threading.Event()
    lock = threading.Lock()
    projects: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    most: dict[str, int] = {"project": 0, "agent": 0, "quick": 0, "full": 0}
    ended: list[str] = []

    def body(ticket: Ticket) -> None:
        job = ticket.job
        with lock:
            projects[job.project] += 1
            agents[job.agent] += 1
            most["project"] = max(most["project"], projects[job.project])
            most["agent"] = max(most["agent"], agents[job.agent])
        gate.wait(GATE_SECONDS)
        for lane in ("quick", "full"):
            with ticket.slot(lane):
                most[lane] = max(most[lane], scheduler.lanes[lane].in_use)
        with lock:
            projects[job.project] -= 1
            agents[job.agent] -= 1
            ended.append(job.key)

    jobs = [
        Job(f"{project}-{agent}-{n}", project, f"{project}-{agent}", False)
        for n in range(3)
        for project in ("p1", "p2", "p3")
        for agent in ("x", "y", "z")
    ]
    for job in jobs:
        scheduler.submit(job, body)
    eventually(lambda: len(scheduler.active_keys()) == 6, "six runs active")
    with lock:
        assert set(projects.values()) == {limits.running_per_project}
        assert max(agents.values()) == limits.running_per_agent
    gate.set()
    eventually(lambda: len(ended) == len(jobs), "every run ended")
    scheduler.shutdown()
    assert most["project"] == limits.running_per_project
    assert most["agent"] == limits.running_per_agent
    assert most["quick"] <= limits.quick_slots
    assert most["full"] <= limits.full_slots


def test_a_before_promote_run_starts_next_and_never_waits_for_review_slots(
    fake: FakeSteps,
) -> None:
    scheduler = FairScheduler(QueueLimits(quick_slots=1, full_slots=1))
    for n in range(1, 13):  # project P's agents queue twelve review runs
        _submit(scheduler, fake, f"r{n}", "P", f"agent-{n}", ["quick", "full"])
    fake.wait_for("quick", "r1", 0)
    fake.release("r1", 0)
    fake.wait_for("full", "r1", 1)  # r1 holds the full slot
    fake.wait_for("quick", "r2", 0)  # r2 holds the quick slot
    _submit(scheduler, fake, "promote", "P", "agent-1", ["quick", "full"], priority=True)
    fake.wait_for("quick", "promote", 0)  # a reserved quick slot, at once
    fake.release("promote", 0)
    fake.wait_for("full", "promote", 1)  # a reserved full slot, at once
    fake.release("promote", 1)
    fake.wait_for("end", "promote")
    starts = [key for kind, key, _ in fake.log if kind == "start"]
    assert starts == ["r1", "r2", "promote"], "no queued review run started before it"
    fake.release_all()
    scheduler.shutdown()


def test_one_agents_queue_is_bounded(fake: FakeSteps) -> None:
    limits = QueueLimits()
    scheduler = FairScheduler(limits)
    _submit(scheduler, fake, "first", "P", "agent", ["quick"])
    fake.wait_for("quick", "first", 0)
    tracemalloc.start()
    try:
        refusals: Counter[str] = Counter()
        baseline = 0
        for n in range(5_000):
            try:
                _submit(scheduler, fake, f"run-{n}", "P", "agent", ["quick"])
            except QueueFull as full:
                refusals[str(full)] += 1
            if n == limits.queued_per_agent:
                baseline = tracemalloc.get_traced_memory()[0]
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert scheduler.queued_of("agent") == limits.queued_per_agent
    [(message, refused)] = refusals.items()
    assert refused == 5_000 - limits.queued_per_agent
    assert "already has 20 receipt runs waiting" in message
    assert grown < 64 * 1024, f"refused runs kept {grown} bytes"
    _submit(scheduler, fake, "other", "P", "other-agent", ["quick"])  # others still run
    fake.wait_for("start", "other")
    fake.release_all()
    scheduler.shutdown()


# --- the real local runtime -------------------------------------------------------------

LONG: dict[str, str | bytes] = {
    ".forkhorse/checks": checks_file(full("long", "sleep 60", timeout=90))
}
SHORT: dict[str, str | bytes] = {".forkhorse/checks": checks_file(full("short", "true"))}


@pytest.fixture
def small_queue(tmp_path: Path, busybox_ref: str) -> Iterator[World]:
    """The real runtime with an agent queue of two, so the bound is reached quickly."""
    queue = QueueLimits(queued_per_agent=2)
    with running_world(tmp_path, busybox_ref, queue=queue) as running:
        yield running


def _running_container(world: World, run: RunRef) -> None:
    world.runtime.supervisor.start_run(run)
    eventually(lambda: containers_of(Podman(), run.generation), "the full check's container")


def _supersede(world: World, run: RunRef) -> RunRef:
    """What a followed push does: move the review to a new head, cancel the old run."""
    newer = world.commit({"next.txt": str(uuid.uuid4())})
    generation = str(uuid.uuid4())
    summary = running_summary("review-created", SystemClock().now())
    assert world.store.retarget_review(run.review_id, run.commit, newer, generation, summary)
    assert world.runtime.supervisor.cancel_run(run)
    return run.model_copy(update={"generation": generation, "commit": newer})


def _event_types(world: World, run: RunRef) -> list[str]:
    return [event["type"] for event in world.runtime.supervisor.history(run)]


def test_superseded_runs_are_stopped_and_the_agent_queue_refuses_past_its_bound(
    small_queue: World,
) -> None:
    world, supervisor = small_queue, small_queue.runtime.supervisor
    running = world.review(LONG)
    _running_container(world, running)
    queued, after = world.review(SHORT), world.review(SHORT)
    supervisor.start_run(queued)  # the agent's one running slot is taken: both wait
    supervisor.start_run(after)
    refused = world.review(SHORT)
    supervisor.start_run(refused)
    summary = world.summary(refused.review_id)
    assert summary.status == "infrastructure-error"
    assert "already has 2 receipt runs waiting" in (summary.checks[0].message or "")

    _supersede(world, queued)
    _supersede(world, running)
    assert supervisor.wait(running, RUN_SECONDS)
    assert containers_of(Podman(), running.generation) == [], "the container is destroyed"
    assert _event_types(world, running)[-1] == "ExecutionAborted"
    assert supervisor.wait(after, RUN_SECONDS)  # the queue moves on
    assert world.summary(after.review_id).status == "passed"
    assert _event_types(world, queued) == ["ExecutionAborted"], "it never started"
    assert {spec.execution for spec in world.containers.started} == {
        running.generation,
        after.generation,
    }
    assert not world.store.attach(
        running.review_id,
        running.commit,
        running.generation,
        running.trigger,
        "0" * 64,
        summary.model_copy(update={"status": "passed"}),
        SystemClock().now(),
    ), "a superseded generation never attaches"


def test_recovery_removes_stale_exports_but_not_a_live_runs(small_queue: World) -> None:
    world = small_queue
    run = world.review(LONG)
    _running_container(world, run)
    checkouts = world.runtime.home / "checkouts"
    live = checkouts / run.generation
    assert live.is_dir()
    stale = checkouts / str(uuid.uuid4()) / "tree"
    stale.mkdir(parents=True)
    (stale / "big").write_bytes(b"x" * 4096)
    partial = checkouts / ".export-abc123"
    partial.mkdir()
    removed = world.runtime.supervisor.remove_stale_exports()
    assert removed == [stale.parent]
    assert live.is_dir(), "a live run's export stays"
    assert partial.is_dir(), "a partial export may be a live run's: it stays"
    assert world.runtime.supervisor.cancel_run(run)
    assert world.runtime.supervisor.wait(run, RUN_SECONDS)
    assert not live.exists()


def test_a_killed_runs_export_is_removed_at_start(tmp_path: Path, busybox_ref: str) -> None:
    images = tmp_path / "images"
    ImageRegistry(images).record("busybox", busybox_ref)
    home = tmp_path / "home"
    worker, run = _start_crash_worker(home, images)
    with worker:  # leaving the block kills it with SIGKILL
        export = home / "checkouts" / run.generation
        partial = home / "checkouts" / ".export-killed"
        partial.mkdir()
        assert export.is_dir()
    restarted = build_local_runtime(home, images=ImageRegistry(images))  # recovers on start
    try:
        assert restarted.supervisor.recovered(60), "orphan cleanup runs in the background"
        assert list((home / "checkouts").iterdir()) == []
        assert containers_of(Podman(), run.generation) == []
    finally:
        restarted.close()


# --- the real server ----------------------------------------------------------------------


def _stop_runs(server: Server, project_id: str) -> None:
    """Test cleanup: stop a project's runs so the module's server closes promptly."""
    runtime = server.app.runtime
    for review in runtime.store.list_reviews(project_id):
        if review.execution is not None:
            runtime.supervisor.cancel_run(
                RunRef(
                    project_id=project_id,
                    review_id=review.id,
                    generation=review.execution.generation,
                    trigger=review.execution.trigger,
                    commit=review.execution.commit,
                )
            )


def _containers_running(server: Server, project_id: str) -> int:
    reviews = server.app.runtime.store.list_reviews(project_id)
    generations = [r.execution.generation for r in reviews if r.execution is not None]
    return sum(bool(containers_of(Podman(), generation)) for generation in generations)


def test_a_busy_project_does_not_stall_another_projects_receipt(
    server: Server,
) -> None:
    busy = new_project(server, False)
    reviews = []
    for name in ("a1", "a2", "a3"):
        lane = new_lane(busy, name)
        reviews.append(lane.request_review(lane.push(checks_files("sleep 60", quick=False)))["id"])
    limits = queue_limits()  # the module server's: A holds its share of the full slots
    held = min(len(reviews), limits.running_per_project, limits.full_slots_per_project)
    try:
        eventually(lambda: _containers_running(server, busy.id) == held, "A's containers")
        other = new_project(server, False)
        lane = new_lane(other, "b")
        review = lane.request_review(lane.push(checks_files()))
        settled = server.owner.wait_receipt(other.id, review["id"])
        assert settled["receipt"]["status"] == "passed"
        statuses = [server.owner.review(busy.id, r)["receipt"]["status"] for r in reviews]
        assert statuses == ["running"] * 3, "B passed while all of A's runs still run or wait"
    finally:
        _stop_runs(server, busy.id)


def test_a_followed_push_stops_the_superseded_run_and_its_container(
    server: Server,
) -> None:
    project = new_project(server, False)
    lane = new_lane(project, "follower")
    review = lane.request_review(lane.push(checks_files("sleep 60", quick=False)), follow=True)
    store, supervisor = server.app.runtime.store, server.app.runtime.supervisor
    stored = store.get_review(review["id"])
    assert stored is not None
    assert stored.execution is not None
    old = RunRef(
        project_id=project.id,
        review_id=review["id"],
        generation=stored.execution.generation,
        trigger="review-created",
        commit=stored.execution.commit,
    )
    eventually(lambda: containers_of(Podman(), old.generation), "the old run's container")
    newer = lane.push(checks_files())
    assert supervisor.wait(old, RUN_SECONDS)
    assert containers_of(Podman(), old.generation) == []
    assert supervisor.history(old)[-1]["type"] == "ExecutionAborted"
    settled = server.owner.wait_receipt(project.id, review["id"])
    assert settled["commit"] == newer
    assert settled["receipt"]["status"] == "passed"


# --- AWS: the orchestrator stops a superseded execution -----------------------------------


def test_step_functions_stops_a_superseded_execution(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")
    with atomic_mock_aws(monkeypatch):
        client = boto3.client("stepfunctions", region_name="us-east-1")
        machine = client.create_state_machine(
            name="ReceiptRun",
            definition=json.dumps(
                {
                    "StartAt": "Wait",
                    "States": {"Wait": {"Type": "Wait", "Seconds": 60, "End": True}},
                }
            ),
            roleArn="arn:aws:iam::123456789012:role/receipt-run",
        )["stateMachineArn"]
        orchestrator = StepFunctionsOrchestrator(client, machine)
        run = RunRef(
            project_id="p",
            review_id="r",
            generation=str(uuid.uuid4()),
            trigger="review-created",
            commit="0" * 40,
        )
        orchestrator.start_run(run)
        assert orchestrator.cancel_run(run)
        described = client.describe_execution(executionArn=orchestrator.execution_arn(run))
        assert described["status"] == "ABORTED"
        never = run.model_copy(update={"generation": str(uuid.uuid4())})
        assert not orchestrator.cancel_run(never)


def test_forkhorse_serve_reads_queue_limits_from_its_environment() -> None:
    two_checks = {"FORKHORSE_CONCURRENCY": "2"}  # the defaults' machine, whatever this one is
    limits = queue_limits(
        {
            **two_checks,
            "FORKHORSE_QUEUE_RUNNING_PER_PROJECT": "4",
            "FORKHORSE_QUEUE_QUEUED_PER_AGENT": "5",
        }
    )
    assert limits == QueueLimits(running_per_project=4, queued_per_agent=5)
    assert queue_limits(two_checks) == QueueLimits()
