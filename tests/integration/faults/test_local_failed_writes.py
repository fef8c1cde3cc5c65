"""Failed writes in a live local server: the same path as the kill campaign, but at each
crash point the write raises (before or after it lands) and the process lives on, as when
a disk fills or SQLite is locked. Without any restart, every run must end, every promote
must settle with a readable outcome, the invariants must hold, and the path must finish."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.service.errors import ServiceError
from forkhorse.service.facade import ServiceSettings
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.integration.faults.invariants import check_local, complete, leftovers, local, settled
from tests.integration.faults.path_worker import (
    PATH,
    PATH_WRITES,
    RUN_SECONDS,
    faulty_wiring,
    set_up,
    walk,
)
from tests.support.faults import CrashPoint, FaultPlan, InjectedFault, crash_points


@pytest.fixture
def live(
    tmp_path: Path,
    images: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[LocalApp, FaultPlan]]:
    plan = FaultPlan()
    faulty_wiring(plan, monkeypatch.setattr)
    runtime = build_local_runtime(tmp_path / "home", images=ImageRegistry(images))
    app = build_local_app(runtime, ServiceSettings())
    assert runtime.supervisor.recovered(60)
    yield app, plan
    app.close()


def _runs_ended(app: LocalApp, project: str) -> None:
    """A live server ends every run it started, whatever write failed."""
    deadline = time.monotonic() + RUN_SECONDS
    while any(
        review.execution is not None and review.execution.is_running
        for review in app.runtime.store.list_reviews(project)
    ):
        assert time.monotonic() < deadline, "a run never ended"
        time.sleep(0.05)


@pytest.mark.parametrize(("index", "phase"), crash_points(PATH))
def test_a_failed_write_at_every_point_keeps_the_invariants_without_a_restart(
    tmp_path: Path, live: tuple[LocalApp, FaultPlan], index: int, phase: str
) -> None:
    app, plan = live
    ids = set_up(app)
    plan.crash = CrashPoint(index, phase, "raise")  # type: ignore[arg-type]
    plan.armed = True
    with contextlib.suppress(InjectedFault, ServiceError):
        walk(app, ids)  # the request that hit the fault fails; the user sees an error
    plan.armed = False
    assert plan.fired, f"the path never reached write {index}: {plan.writes}"
    assert plan.writes[index] == PATH_WRITES[index]
    _runs_ended(app, ids["project"])
    settled(app, ids)
    check_local(app, ids, restarted=False)
    complete(local(app, ids), ids)
    settled(app, ids)
    check_local(app, ids, restarted=False)
    deployment = app.runtime.deps.containers.deployment  # type: ignore[attr-defined]
    app.runtime.supervisor.shutdown()
    assert leftovers(tmp_path / "home", deployment) == []
