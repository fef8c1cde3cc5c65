"""Faults: a supervisor killed mid-run, a crash between put and attach."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.domain.receipts import ReceiptSummary
from forkhorse.domain.run import RunRef
from forkhorse.ports.clock import SystemClock
from forkhorse.wiring.local import build_local_runtime

from tests.integration.containers.helpers import containers_of
from tests.integration.runner import crash_worker
from tests.integration.runner.scenarios import SCENARIOS
from tests.support.forked import ForkedWorker, start_worker
from tests.support.runner import World

RUN_STARTED_SECONDS = 120.0


def _start_crash_worker(home: Path, images: Path) -> tuple[ForkedWorker, RunRef]:
    """A worker with one long run whose container podman lists; kill it by leaving
    `with worker:`."""
    worker = start_worker(crash_worker.start_long_run, home, images)
    try:
        return worker, RunRef.model_validate(worker.first_message(RUN_STARTED_SECONDS))
    except BaseException:
        worker.stop()
        raise


def test_a_killed_supervisor_leaves_an_infrastructure_error_that_never_attaches(
    tmp_path: Path, busybox_ref: str
) -> None:
    images = tmp_path / "images"
    ImageRegistry(images).record("busybox", busybox_ref)
    home = tmp_path / "home"
    worker, run = _start_crash_worker(home, images)
    with worker:  # leaving the block kills it with SIGKILL
        assert containers_of(Podman(), run.generation), "the check's container is running"

    restarted = build_local_runtime(home, images=ImageRegistry(images))  # recovers on start
    try:
        assert restarted.supervisor.recovered(60), "orphan cleanup runs in the background"
        review = restarted.store.get_review(run.review_id)
        assert review is not None
        assert review.execution is not None
        summary: ReceiptSummary = review.execution.summary
        assert summary.status == "infrastructure-error"
        assert summary.digest is None
        assert containers_of(Podman(), run.generation) == [], "the orphan container is gone"
        # A late result of the interrupted generation can never attach.
        assert not restarted.store.attach(
            run.review_id,
            run.commit,
            run.generation,
            run.trigger,
            "0" * 64,
            summary.model_copy(update={"status": "passed"}),
            SystemClock().now(),
        )
    finally:
        restarted.close()


class CrashBeforeAttach(Exception):
    """The process dies after publishing the record and before attaching it."""


def test_a_crash_between_put_and_attach_leaves_the_record_unattached(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = world.store
    published: list[str] = []
    real_put = store.put_record_chunks

    def put_then_remember(digest: str, chunks: list[bytes | memoryview], now: datetime) -> None:
        real_put(digest, chunks, now)
        published.append(digest)

    def crash(*args: object, **kwargs: object) -> bool:
        raise CrashBeforeAttach

    monkeypatch.setattr(store, "put_record_chunks", put_then_remember)
    monkeypatch.setattr(store, "attach", crash)
    run = world.review(SCENARIOS[0].files)
    world.run(run)
    summary = world.summary(run.review_id)
    assert summary.status == "infrastructure-error"
    assert summary.digest is None, "the current digest is unchanged"
    record_digest = published[-1]
    assert store.get_record_chunks(record_digest) is not None, "the record stays, unattached"


def test_an_attach_that_lands_and_then_fails_keeps_the_receipt_and_ends_the_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write landed but its caller saw an error (a lost reply): the catch-all must not
    try to overwrite the attached receipt with an infrastructure error."""
    store = world.store
    real_attach = store.attach

    def attach_then_fail(*args: object, **kwargs: object) -> bool:
        assert real_attach(*args, **kwargs)
        raise CrashBeforeAttach

    monkeypatch.setattr(store, "attach", attach_then_fail)
    run = world.review(SCENARIOS[0].files)
    world.run(run)
    summary = world.summary(run.review_id)
    assert (summary.status, summary.digest is not None) == ("passed", True)
    assert world.record(run.review_id).generation == run.generation
    ended = world.runtime.supervisor.history(run)[-1]
    assert ended["type"] == "ExecutionSucceeded", ended
