"""A promote whose full check outlasts Lambda's 900 s ceiling, in simulated time, on the moto
path: the real PromoteRun and ReceiptRun machines, a real busybox container under podman.

Simulated time lives in one place: the end of the check's task. ReceiptRun's FullStart state
waits for its task token, and the stand-in for ECS's task state change moves the shared
clock (the service's and the runner's) forward by TASK_SECONDS before it reports the real
container's end to FullStopped; no Wait state runs and no step Lambda moves the clock. The
evidence is the real container's, so the required gate judges it as it would any run."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from forkhorse.wiring.handlers import providers
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (
    WaitFunction,
)
from moto.stepfunctions.parser.asl.eval.environment import Environment

from tests.support.promote import AwsWorld, ShiftClock

LAMBDA_CEILING_SECONDS = 900
# The task's simulated life: past Lambda's ceiling, within the check's declared timeout.
TASK_SECONDS = 1200
# Real seconds a Wait state would take (none should run).
REAL_TICK_SECONDS = 1.0
# Within the declared timeout (and so within the lease) however many polls the run takes.
LONG_CHECK: dict[str, str | bytes] = {
    ".forkhorse/checks": json.dumps(
        [
            {
                "name": "long",
                "tier": "full",
                "image": "busybox",
                "run": "sleep 3 && echo done",
                "timeoutSeconds": 3600,
            }
        ]
    )
}


@dataclass
class SimulatedTime:
    """The clock's advances: by each Wait state, and during each Lambda step's invoke."""

    clock: ShiftClock
    waits: list[int] = field(default_factory=list)
    steps: list[tuple[str, timedelta]] = field(default_factory=list)
    tasks: list[int] = field(default_factory=list)

    def task_ran(self) -> None:
        self.clock.offset += timedelta(seconds=TASK_SECONDS)
        self.tasks.append(TASK_SECONDS)

    def wait(self) -> Callable[[WaitFunction, Environment, int], None]:
        def simulated_wait(function: WaitFunction, env: Environment, wait_seconds: int) -> None:
            self.clock.offset += timedelta(seconds=wait_seconds)
            self.waits.append(wait_seconds)
            env.program_state_event.wait(REAL_TICK_SECONDS)  # a stopped execution wakes at once

        return simulated_wait

    def timed(self, invoke: Callable[..., Any]) -> Callable[..., Any]:
        def timed_invoke(backend: object, function_name: str, *args: Any) -> Any:
            before = self.clock.offset
            try:
                return invoke(backend, function_name, *args)
            finally:
                self.steps.append((function_name.rsplit(":", 1)[-1], self.clock.offset - before))

        return timed_invoke


def _simulate(world: AwsWorld, monkeypatch: pytest.MonkeyPatch) -> SimulatedTime:
    """From now on a full check's task ends TASK_SECONDS of simulated time after it starts,
    and the runner shares the service's clock; a Wait state, if any ran, is recorded."""
    simulated = SimulatedTime(world.clock)
    monkeypatch.setattr(WaitFunction, "_wait_interval", simulated.wait())
    monkeypatch.setattr(LambdaSimpleBackend, "invoke", simulated.timed(LambdaSimpleBackend.invoke))
    runner = dataclasses.replace(providers.runner(), clock=world.clock)
    monkeypatch.setattr(providers, "runner", lambda: runner)
    callbacks = dataclasses.replace(providers.callbacks(), runner=runner)
    monkeypatch.setattr(providers, "callbacks", lambda: callbacks)
    assert world.task_changes is not None
    world.task_changes.before_report = simulated.task_ran
    return simulated


def test_a_check_longer_than_lambdas_ceiling_is_promoted(
    aws_world: AwsWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, LONG_CHECK)
    review_id = aws_world.approved(lane, commit)
    initial = aws_world.canonical()
    simulated = _simulate(aws_world, monkeypatch)

    path = f"{aws_world.promotion_path(review_id)}/promote"
    status, body = aws_world.call("POST", path, {"commit": commit})
    assert status == 202, body
    status, body = aws_world.settle(review_id)
    assert status == 200, body
    promotion = body["promotion"]
    assert (promotion["from"], promotion["to"], promotion["mode"]) == (initial, commit, "required")
    [settled] = aws_world.promotions(review_id)
    assert settled.state == "done"
    assert aws_world.execution(settled.id)["status"] == "SUCCEEDED"

    # Canonical fast-forwarded once; the ledger holds the before-promote run's digest.
    assert aws_world.canonical() == commit
    ledger = aws_world.store.ledger(aws_world.project_id)
    assert [(entry.commit, entry.digest) for entry in ledger] == [(commit, promotion["digest"])]
    assert aws_world.store.open_promotion(aws_world.project_id) is None

    # The before-promote run lasted past Lambda's ceiling in simulated time, and passed.
    summary = aws_world.summary(review_id)
    assert summary is not None
    assert (summary.trigger, summary.status, summary.digest) == (
        "before-promote",
        "passed",
        promotion["digest"],
    )
    assert summary.duration_ms is not None
    assert summary.duration_ms > LAMBDA_CEILING_SECONDS * 1000

    # All of that time passed while FullStart's state waited for its token: no Wait state,
    # no poll, and no step Lambda blocked; FullStopped answered each FullStart once.
    assert simulated.tasks == [TASK_SECONDS]
    assert simulated.waits == []
    starts = aws_world.invoked.count("run_full_start")
    assert aws_world.invoked.count("run_full_stopped") == starts
    assert [(name, spent) for name, spent in simulated.steps if spent] == []
    promote_steps = [name for name, _ in simulated.steps if name.startswith("promote_")]
    assert promote_steps == [
        "promote_acquire",
        "promote_start_run",
        "promote_verify",
        "promote_write",
        "promote_release",
    ]
