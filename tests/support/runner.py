"""A real local world for receipt runs: SQLite, disk git, bubblewrap and podman (busybox)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.domain.limits import QueueLimits
from forkhorse.domain.model import Fork, Packet, Principal, Project, ProjectSettings, Review
from forkhorse.domain.receipts import ReceiptRecord, running_summary
from forkhorse.domain.run import RunRef
from forkhorse.ports.clock import SystemClock
from forkhorse.ports.containers import ContainerHandle, ContainerSpec
from forkhorse.records import get_record
from forkhorse.wiring.local import LocalRuntime, build_local_runtime

from tests.support.gitrepo import commit_files

PROJECT = "proj"
FORK = "fork-1"
AGENT = "agent-1"
PACKET = "packet-1"
RUN_TIMEOUT = 90.0


class CountingContainers(PodmanContainerPort):
    """The real podman port, counting starts (a failed quick gate must start none)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.started: list[ContainerSpec] = []

    def start(self, spec: ContainerSpec) -> ContainerHandle:
        self.started.append(spec)
        return super().start(spec)


@dataclass
class World:
    runtime: LocalRuntime
    containers: CountingContainers
    reviews: list[str] = field(default_factory=list)

    @property
    def store(self):  # type: ignore[no-untyped-def]
        return self.runtime.store

    def commit(self, files: Mapping[str, str | bytes]) -> str:
        return commit_files(self.runtime.git.store(PROJECT), files)

    def review(self, files: Mapping[str, str | bytes], trigger: str = "review-created") -> RunRef:
        """A review of a fresh commit with a running execution, ready to start."""
        return self.review_commit(self.commit(files), trigger)

    def review_commit(self, sha: str, trigger: str = "review-created") -> RunRef:
        """A review of a commit already in the project's objects, ready to start."""
        review_id = f"review-{len(self.reviews) + 1}"
        now = SystemClock().now()
        assert self.store.create_review(
            Review(
                id=review_id,
                project_id=PROJECT,
                packet_id=PACKET,
                fork_id=FORK,
                agent_id=AGENT,
                commit=sha,
                created_at=now,
            )
        )
        self.reviews.append(review_id)
        return self.restart(review_id, sha, trigger)

    def restart(self, review_id: str, sha: str, trigger: str = "review-created") -> RunRef:
        run = RunRef(
            project_id=PROJECT,
            review_id=review_id,
            generation=str(uuid.uuid4()),
            trigger=trigger,  # type: ignore[arg-type]
            commit=sha,
        )
        summary = running_summary(run.trigger, SystemClock().now())
        assert self.store.start_execution(review_id, sha, run.trigger, run.generation, summary)
        return run

    def run(self, run: RunRef) -> None:
        self.runtime.supervisor.start_run(run)
        assert self.runtime.supervisor.wait(run, RUN_TIMEOUT), "the run did not finish"

    def summary(self, review_id: str):  # type: ignore[no-untyped-def]
        review = self.store.get_review(review_id)
        assert review is not None
        return None if review.execution is None else review.execution.summary

    def record(self, review_id: str) -> ReceiptRecord:
        summary = self.summary(review_id)
        assert summary is not None
        assert summary.digest is not None
        record = get_record(self.store, summary.digest)
        assert record is not None
        return record


def seed_project(runtime: LocalRuntime) -> None:
    now = SystemClock().now()
    store = runtime.store
    store.create_principal(Principal(kind="agent", id=AGENT, name=AGENT, created_at=now), "h1")
    store.create_project(
        Project(
            id=PROJECT,
            name="Project",
            owner_id="owner",
            created_at=now,
            settings=ProjectSettings(require_receipt=True),
        )
    )
    store.create_packet(Packet(id=PACKET, project_id=PROJECT, title="Work", created_at=now))
    store.create_fork(
        Fork(id=FORK, project_id=PROJECT, name="fork", owner_agent_id=AGENT, created_at=now)
    )
    assert store.claim_packet(PACKET, AGENT, timedelta(hours=1), now) is not None
    runtime.git.store(PROJECT).create_canonical()


@contextmanager
def running_world(
    tmp_path: Path,
    busybox_ref: str,
    containers_type: type[CountingContainers] = CountingContainers,
    queue: QueueLimits | None = None,
) -> Iterator[World]:
    """The real local runtime over podman, its project seeded; closed and cleaned after."""
    registry = ImageRegistry(tmp_path / "images")
    registry.record("busybox", busybox_ref)
    home = tmp_path / "home"
    containers = containers_type(home, registry)
    runtime = build_local_runtime(home, images=registry, containers=containers, queue=queue)
    seed_project(runtime)
    try:
        yield World(runtime, containers)
    finally:
        runtime.close()
        containers.cleanup_orphans(frozenset())


@pytest.fixture
def world(tmp_path: Path, busybox_ref: str) -> Iterator[World]:
    with running_world(tmp_path, busybox_ref) as running:
        yield running
