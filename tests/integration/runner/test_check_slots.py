"""A full check holds the machine's check slot while its container runs, not while Forkhorse
collects it and confirms it gone: the next check starts meanwhile, and still never beside a
running container when the machine allows one check at a time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from forkhorse.domain.limits import QueueLimits
from forkhorse.ports.containers import ContainerHandle, ContainerSpec

from tests.integration.runner.scenarios import checks_file, full
from tests.support.runner import CountingContainers, World, running_world

pytestmark = pytest.mark.podman
HOLD_SECONDS = 20.0  # how long the first cleanup waits for the next container, at most
ONE_CHECK_AT_A_TIME = QueueLimits(
    running_per_project=2, running_per_agent=2, quick_slots=1, full_slots=1, check_slots=1
)


class HeldCleanup(CountingContainers):
    """Holds the first cleanup until another container has started (bounded)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.second_started = threading.Event()
        self.ended_before_second: bool | None = None
        self.started_during_cleanup = False
        self._ended: set[str] = set()
        self._lock = threading.Lock()

    def start(self, spec: ContainerSpec) -> ContainerHandle:
        with self._lock:
            if len(self.started) == 1:
                self.ended_before_second = len(self._ended) == 1
        handle = super().start(spec)
        if len(self.started) == 2:
            self.second_started.set()
        return handle

    def wait(self, handle: ContainerHandle, seconds: float) -> bool:
        ended = super().wait(handle, seconds)
        if ended:
            with self._lock:
                self._ended.add(handle.container_id)
        return ended

    def destroy(self, handle: ContainerHandle) -> None:
        if handle.container_id == self._first_id():
            self.started_during_cleanup = self.second_started.wait(HOLD_SECONDS)
        super().destroy(handle)

    def _first_id(self) -> str | None:
        with self._lock:
            return next(iter(self._ended), None)


@pytest.fixture
def held(tmp_path: Path, busybox_ref: str) -> Iterator[World]:
    with running_world(tmp_path, busybox_ref, HeldCleanup, ONE_CHECK_AT_A_TIME) as running:
        yield running


def test_the_next_check_starts_while_an_ended_container_is_confirmed_gone(held: World) -> None:
    files = {".forkhorse/checks": checks_file(full("t", "true"))}
    runs = [held.review({**files, "README.md": f"run {index}\n"}) for index in range(2)]
    for run in runs:
        held.runtime.supervisor.start_run(run)
    for run in runs:
        assert held.runtime.supervisor.wait(run, 90.0), "the run did not finish"
    containers = held.containers
    assert isinstance(containers, HeldCleanup)
    assert containers.started_during_cleanup, "the second check waited for the first cleanup"
    assert containers.ended_before_second, "two containers ran at once on a one-check machine"
    assert [held.summary(review).status for review in held.reviews] == ["passed", "passed"]
