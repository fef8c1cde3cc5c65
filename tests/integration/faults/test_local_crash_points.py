"""The local crash-point campaign: kill -9 before and after every write of one review's
path (push → review → quick + full run → attach → approve → promote, required mode), then
restart on the same home, check the invariants, finish the path and check them again.

`PATH_WRITES` is the path's write sequence; the recording test proves it is exactly what a
real walk does, so a change in the path's writes fails here until the list is updated and
every new write gets its crash points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.api.local import LocalApp, build_local_app
from forkhorse.service import ServiceSettings
from forkhorse.wiring.local import build_local_runtime

from tests.integration.containers.conftest import busybox_ref, podman  # noqa: F401
from tests.integration.faults.invariants import check_local, complete, leftovers, local, settled
from tests.support.faults import PHASES, logged_writes, read_log

ROOT = Path(__file__).resolve().parents[3]
WORKER_SECONDS = 240

PATH_WRITES = [
    "DiskGitStore.update_fork_ref",  # the push
    "SqliteStore.create_review",  # the review, with its running execution
    "SqliteStore.update_summary",  # prepare: the checks, running
    "SqliteStore.put_record_chunks",  # the quick check's evidence drop
    "SqliteStore.update_summary",  # its result on /state...
    "SqliteStore.put_record_chunks",  # ...and its check record
    "DulwichSnapshot.export_to",  # the full check's checkout
    "SqliteStore.update_summary",  # its result on /state...
    "SqliteStore.put_record_chunks",  # ...and its check record
    "SqliteStore.put_record_chunks",  # finalize: the receipt record...
    "SqliteStore.attach",  # ...attached
    "SqliteStore.approve",
    "SqliteStore.request_promotion",
    "SqlitePromoteJournal.start",
    "SqliteStore.acquire_lease",  # Acquire
    "SqliteStore.begin_promotion",
    "SqlitePromoteJournal.record",
    "SqliteStore.start_execution",  # StartRun: the before-promote run
    "SqlitePromoteJournal.record",
    "SqliteStore.update_summary",  # RunChecks, as above
    "SqliteStore.put_record_chunks",
    "SqliteStore.update_summary",
    "SqliteStore.put_record_chunks",
    "DulwichSnapshot.export_to",
    "SqliteStore.update_summary",
    "SqliteStore.put_record_chunks",
    "SqliteStore.put_record_chunks",
    "SqliteStore.attach",
    "SqlitePromoteJournal.record",
    "SqliteStore.arm_promotion",  # Verify
    "SqlitePromoteJournal.record",
    "DiskGitStore.update_canonical_ref",  # Write
    "SqliteStore.settle_promotion",
    "SqlitePromoteJournal.record",
    "SqliteStore.release_lease",  # Release
    "SqlitePromoteJournal.record",
    "SqlitePromoteJournal.record",  # Ended
]


@pytest.fixture
def images(tmp_path: Path, busybox_ref: str) -> Path:  # noqa: F811
    directory = tmp_path / "images"
    ImageRegistry(directory).record("busybox", busybox_ref)
    return directory


def _walk(tmp_path: Path, images: Path, *crash: str) -> tuple[dict[str, str], int]:
    """Run the worker on `tmp_path/home`; its ids and its exit status."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers/forkhorse")])}
    command = ["tests.integration.faults.path_worker", str(tmp_path / "home"), str(images)]
    worker = subprocess.Popen(
        [sys.executable, "-m", *command, str(tmp_path / "writes.log"), *crash],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    try:
        line = worker.stdout.readline()
        assert line, "the worker died before its project was set up"
        return json.loads(line), worker.wait(WORKER_SECONDS)
    finally:
        worker.kill()
        worker.wait()


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


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(
    "index", range(len(PATH_WRITES)), ids=[f"{i:02d}-{n}" for i, n in enumerate(PATH_WRITES)]
)
def test_kill_9_at_every_write_keeps_the_invariants(
    tmp_path: Path, images: Path, restarted: list[LocalApp], index: int, phase: str
) -> None:
    ids, status = _walk(tmp_path, images, str(index), phase)
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
