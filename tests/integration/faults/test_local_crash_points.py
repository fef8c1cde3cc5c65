"""The local crash-point campaign: kill -9 before and after every write of one review's
path (push → review → quick + full run → attach → approve → promote, required mode), then
restart on the same home, check the invariants, finish the path and check them again.

`PATH_WRITES` is the path's write sequence; the recording test proves it is exactly what a
real walk does, so a change in the path's writes fails here until the list is updated and
every new write gets its crash points."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.service.facade import ServiceSettings
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.integration.faults import path_worker
from tests.integration.faults.invariants import check_local, complete, leftovers, local, settled
from tests.integration.faults.path_worker import PATH, PATH_WRITES
from tests.support.faults import CrashPoint, Phase, crash_points, logged_writes, read_log
from tests.support.forked import start_worker

WORKER_SECONDS = 240
SET_UP_SECONDS = 120


def _walk(
    tmp_path: Path, images: Path, crash: CrashPoint | None = None
) -> tuple[dict[str, str], int | None]:
    """Run the worker on `tmp_path/home`; its ids and its exit status."""
    worker = start_worker(
        path_worker.run, tmp_path / "home", images, tmp_path / "writes.log", crash
    )
    try:
        ids: dict[str, str] = worker.first_message(SET_UP_SECONDS)
        return ids, worker.exit_code(WORKER_SECONDS)
    finally:
        worker.stop()


@pytest.fixture
def restarted(tmp_path: Path, images: Path) -> Iterator[list[LocalApp]]:
    """The app restarted on the worker's home (filled in by the test), closed at the end."""
    apps: list[LocalApp] = []
    yield apps
    for app in apps:
        app.close()


def _restart(tmp_path: Path, images: Path, apps: list[LocalApp]) -> LocalApp:
    runtime = build_local_runtime(tmp_path / "home", images=ImageRegistry(images))
    apps.append(build_local_app(runtime, ServiceSettings()))
    return apps[-1]


def _close_and_check_leftovers(tmp_path: Path, apps: list[LocalApp]) -> None:
    app = apps.pop()
    deployment = app.runtime.deps.containers.deployment  # type: ignore[attr-defined]
    app.close()
    assert leftovers(tmp_path / "home", deployment) == []


def test_the_recorded_path_is_the_listed_one(
    tmp_path: Path, images: Path, restarted: list[LocalApp]
) -> None:
    ids, status = _walk(tmp_path, images)
    assert status == 0, "the uninterrupted path promotes"
    assert logged_writes(tmp_path / "writes.log") == PATH_WRITES
    app = _restart(tmp_path, images, restarted)
    settled(app, ids)
    check_local(app, ids)
    assert [entry.commit for entry in app.runtime.store.ledger(ids["project"])] == [ids["commit"]]
    _close_and_check_leftovers(tmp_path, restarted)


@pytest.mark.parametrize(("index", "phase"), crash_points(PATH))
def test_kill_9_at_every_write_keeps_the_invariants(
    tmp_path: Path, images: Path, restarted: list[LocalApp], index: int, phase: Phase
) -> None:
    ids, status = _walk(tmp_path, images, CrashPoint(index, phase))
    log = read_log(tmp_path / "writes.log")
    assert status == -9, f"the worker was not killed {phase} write {index}: {log[-3:]}"
    assert log[-1] == f"crash {index} {phase} {PATH_WRITES[index]}"
    app = _restart(tmp_path, images, restarted)
    settled(app, ids)
    check_local(app, ids)
    complete(local(app, ids), ids)
    settled(app, ids)
    check_local(app, ids)
    _close_and_check_leftovers(tmp_path, restarted)
