"""Drift guard for promote: the real promote.asl.json under moto's Step Functions (the
before-promote ReceiptRun nested with `startExecution.sync:2`, every Lambda task dispatched
to the real step handlers) must give what the local journaled supervisor gives, for each
scenario: the answer, canonical, the ledger, the promotion's state and the lease."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service.facade import Service, ServiceSettings
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.support.gitrepo import commit_files
from tests.support.promote import (
    FAILING,
    OWNER,
    PASSING,
    SETTLE_TIMEOUT,
    AwsWorld,
    Crash,
    Lane,
    ShiftClock,
    _capability,
)
from tests.support.status import http_status

# The local supervisor's step names -> the AWS step function that runs the same step.
STEPS = {"StartRun": "promote_start_run", "Write": "promote_write"}
TIMED_OUT = {
    ".forkhorse/checks": (
        '[{"name":"slow","tier":"full","image":"busybox","run":"sleep 30","timeoutSeconds":1}]\n'
    )
}


class LocalWorld(AwsWorld):
    """The same world in local mode: SQLite, disk git, the journaled promote supervisor."""

    app: LocalApp
    hooks: dict[str, Callable[[], None]]

    def service(self) -> Service:
        return self.app.service


@pytest.fixture
def local_world(tmp_path: Path, busybox_ref: str) -> Iterator[LocalWorld]:
    registry = ImageRegistry(tmp_path / "images")
    registry.record("busybox", busybox_ref)
    clock = ShiftClock()
    runtime = build_local_runtime(tmp_path / "local", images=registry, clock=clock)
    world = LocalWorld(runtime, runtime.store, clock, project_id="")
    world.hooks = {}

    def after_step(name: str) -> None:
        if name in world.hooks:
            world.hooks.pop(name)()

    settings = ServiceSettings(promote_wait_seconds=0.0, lease_wait_seconds=5.0)
    world.app = build_local_app(runtime, settings, after_step)
    project = world.app.service.projects.create_project(OWNER, "proj", True).project
    world.project_id = project.id
    repos = runtime.git.store(world.project_id)
    initial = commit_files(repos, {"README.md": "hello\n"})
    assert repos.update_canonical_ref(_capability(world.project_id), DEFAULT_BRANCH, None, initial)
    try:
        yield world
    finally:
        world.app.close()


def _after(world: AwsWorld, step: str, action: Callable[[], None]) -> None:
    """Run `action` right after `step` completes, in either world."""
    if isinstance(world, LocalWorld):
        world.hooks[step] = action
    else:
        world.after[STEPS[step]] = action


@dataclass(frozen=True)
class Case:
    name: str
    files: dict[str, str | bytes]
    # (world, lane) -> prepared before the promote; returns nothing
    prepare: Callable[[AwsWorld, Lane], None] = lambda world, lane: None
    advisory_approval: bool = False


def _move_fork(world: AwsWorld, lane: Lane) -> None:
    _after(world, "StartRun", lambda: _push_more(world, lane))


def _push_more(world: AwsWorld, lane: Lane) -> None:
    world.push(lane, {"later.txt": "pushed during the promote\n"})


def _steal_lease(world: AwsWorld, lane: Lane) -> None:
    def steal() -> None:
        world.clock.offset = timedelta(minutes=30)  # past the lease, within the claim
        assert world.store.acquire_lease(
            world.project_id, "thief", timedelta(days=1), world.clock.now()
        )

    _after(world, "StartRun", steal)


def _crash_after_write(world: AwsWorld, lane: Lane) -> None:
    def crash() -> None:
        raise Crash("the process died right after the canonical write")

    _after(world, "Write", crash)


CASES = [
    Case("pass", PASSING),
    Case("before-promote-failure", FAILING, advisory_approval=True),
    Case("timeout", TIMED_OUT, advisory_approval=True),
    Case("fork-head-moved", PASSING, _move_fork),
    Case("lease-lost", PASSING, _steal_lease),
    Case("crash-after-canonical-write", PASSING, _crash_after_write),
]


def _outcome(world: AwsWorld, case: Case) -> dict[str, Any]:
    service = world.service()
    lane = world.lane("agent")
    if case.advisory_approval:
        service.projects.set_settings(OWNER, world.project_id, False)
    commit = world.push(lane, case.files)
    review_id = world.approved(lane, commit)
    service.projects.set_settings(OWNER, world.project_id, True)
    initial = world.canonical()
    case.prepare(world, lane)
    service.promotions.promote(OWNER, world.project_id, review_id, commit, wait_seconds=0)
    [promotion] = world.promotions(review_id)
    _workflow_ended(world, promotion.id)
    answer = _settled(service, world, review_id)
    [promotion] = world.promotions(review_id)
    summary = world.summary(review_id)
    return {
        "status": http_status(answer),
        "body": _without_ids(answer.body.model_dump(mode="json")),
        "canonical": {initial: "unchanged", commit: "fast-forwarded"}.get(world.canonical()),
        "ledger": len(world.store.ledger(world.project_id)),
        "state": promotion.state,
        "fenced": world.store.open_promotion(world.project_id) is not None,
        "receipt": None if summary is None else (summary.trigger, summary.status),
    }


def _workflow_ended(world: AwsWorld, promotion_id: str) -> None:
    """Wait for the workflow itself (a shifted clock makes readers presume it dead)."""
    if isinstance(world, LocalWorld):
        assert world.app.promotes.wait(promotion_id, SETTLE_TIMEOUT)
    else:
        assert world.execution(promotion_id)["status"] != "RUNNING"


def _settled(service: Service, world: AwsWorld, review_id: str) -> Any:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        answer = service.promotions.status(OWNER, world.project_id, review_id)
        if not answer.pending or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def _without_ids(body: dict[str, Any]) -> dict[str, Any]:
    promotion = body.get("promotion")
    if not isinstance(promotion, dict):
        return body
    kept = {k: v for k, v in promotion.items() if k in ("state", "mode")}
    return {"promotion": kept}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_step_functions_promotes_as_the_local_supervisor_does(
    aws_world: AwsWorld, local_world: LocalWorld, case: Case
) -> None:
    remote = _outcome(aws_world, case)
    local = _outcome(local_world, case)
    assert remote == local
