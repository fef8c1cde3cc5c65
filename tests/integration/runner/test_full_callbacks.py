"""A full check without a poll loop: FullStart holds the state's task token, the container's
end answers it once, and a wait that times out ends the check (real podman containers, the
held tokens in moto's DynamoDB). The drift guard runs the same steps behind moto's Step
Functions; here each step's answers are recorded to try its edges."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb.waits import DynamoDbFullWaits
from forkhorse.ports.containers import ContainerEnded
from forkhorse.ports.waits import HeldWait
from forkhorse.runner.workflow import callbacks, steps
from forkhorse.runner.workflow.callbacks import CallbackDeps
from forkhorse.runner.workflow.contracts import (
    ExecutionInput,
    FullLaunch,
    FullOvertime,
    FullProgress,
    PreparedChecks,
)
from forkhorse.wiring.events import container_ended

from tests.integration.runner.scenarios import checks_file, full
from tests.support.aws import create_table_from_template
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.runner import World
from tests.support.step_functions import STOPPED_SAMPLE, await_container_end

TOKEN = "token-of-the-waiting-state"


@dataclass
class Answers:
    """Step Functions' side of the tokens: what each waiting state was answered."""

    succeeded: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def succeed(self, token: str, output: dict[str, Any]) -> bool:
        with self.lock:
            answered = any(token == seen for seen, _ in self.succeeded)
            self.succeeded.append((token, output))
        return not answered

    def fail(self, token: str, error: str, cause: str) -> bool:
        self.failed.append((token, error))
        return True


@pytest.fixture
def deps(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[CallbackDeps, Answers]]:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")
    with atomic_mock_aws(monkeypatch):
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        waits = DynamoDbFullWaits(dynamodb, create_table_from_template(dynamodb))
        answers = Answers()
        yield CallbackDeps(world.runtime.deps, waits, answers), answers


def _launch(world: World, deps: CallbackDeps, run: str, timeout: int = 30) -> FullLaunch:
    ref = world.review({".forkhorse/checks": checks_file(full("unit", run, timeout=timeout))})
    prepared = steps.prepare(deps.runner, ExecutionInput(run=ref))
    assert isinstance(prepared, PreparedChecks)
    check = prepared.full[0]
    return FullLaunch(run=ref, check=check, wait_seconds=timeout + 5, task_token=TOKEN)


def _held_handle(deps: CallbackDeps, launch: FullLaunch) -> Any:
    held = deps.waits.peek(launch.run.generation, launch.check.name)
    assert held is not None
    handle = FullProgress.model_validate_json(held.progress).handle
    assert handle is not None
    return handle


def _ended(deps: CallbackDeps, launch: FullLaunch) -> ContainerEnded:
    """What ECS reports once the check's task stopped."""
    handle = _held_handle(deps, launch)
    assert await_container_end(deps.runner.containers, handle), "the check never ended"
    return ContainerEnded(execution=handle.execution, container_id=handle.container_id)


def test_a_started_check_is_held_and_its_end_answers_the_token_once(
    world: World, deps: tuple[CallbackDeps, Answers]
) -> None:
    callback, answers = deps
    launch = _launch(world, callback, "sleep 1 && echo done")
    assert callbacks.full_launch(callback, launch).waiting is True
    assert answers.succeeded == []  # the state waits, billing nothing
    ended = _ended(callback, launch)
    stranger = ContainerEnded(execution=ended.execution, container_id="another-task")
    assert callbacks.full_stopped(callback, stranger).answered is False
    assert callbacks.full_stopped(callback, ended).answered is True
    assert callbacks.full_stopped(callback, ended).answered is False  # claimed once
    [(token, output)] = answers.succeeded
    assert token == TOKEN
    assert (output["done"], output["outcome"]) == (True, "passed")
    assert output["check"]["name"] == "unit"


def test_concurrent_reports_of_one_end_answer_once(
    world: World, deps: tuple[CallbackDeps, Answers]
) -> None:
    """EventBridge delivers at least once: duplicates racing each other answer once."""
    callback, answers = deps
    launch = _launch(world, callback, "true")
    callbacks.full_launch(callback, launch)
    ended = _ended(callback, launch)
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(_answered(callback, ended)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, False, False, True]
    assert len(answers.succeeded) == 1


def _answered(callback: CallbackDeps, ended: ContainerEnded) -> bool:
    return callbacks.full_stopped(callback, ended).answered


def test_a_check_refused_at_start_is_answered_at_once_with_no_hold(
    world: World, deps: tuple[CallbackDeps, Answers]
) -> None:
    callback, answers = deps
    launch = _launch(world, callback, "true")
    unknown = launch.model_copy(update={"check": launch.check.model_copy(update={"image": "no"})})
    assert callbacks.full_launch(callback, unknown).waiting is False
    [(token, output)] = answers.succeeded
    assert (token, output["done"], output["outcome"]) == (TOKEN, True, "infrastructure-error")
    assert callback.waits.peek(launch.run.generation, "unit") is None


def test_a_container_that_ends_before_its_hold_is_answered_by_full_start(
    world: World, deps: tuple[CallbackDeps, Answers], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No event will find a hold stored after the task's end: FullStart answers itself."""
    callback, answers = deps
    launch = _launch(world, callback, "true")
    hold = callback.waits.hold

    def late_hold(generation: str, check: str, wait: HeldWait, expires: Any) -> None:
        handle = FullProgress.model_validate_json(wait.progress).handle
        assert handle is not None
        assert await_container_end(callback.runner.containers, handle)  # it ends first
        hold(generation, check, wait, expires)

    monkeypatch.setattr(callback.waits, "hold", late_hold)
    assert callbacks.full_launch(callback, launch).waiting is True
    [(_, output)] = answers.succeeded
    assert output["outcome"] == "passed"


def test_a_wait_that_times_out_ends_the_check_as_timed_out(
    world: World, deps: tuple[CallbackDeps, Answers]
) -> None:
    """The check outlives its timeout: FullOvertime stops it and records it timed out, and
    the task's late stop answers nothing."""
    callback, answers = deps
    launch = _launch(world, callback, "sleep 60", timeout=1)
    callbacks.full_launch(callback, launch)
    handle = _held_handle(callback, launch)
    while time.time() < handle.deadline:
        time.sleep(0.1)
    overtime = FullOvertime(
        run=launch.run,
        check=launch.check,
        wait_seconds=launch.wait_seconds,
        timed_out={"Error": "States.Timeout", "Cause": "The state timed out."},
    )
    ended = callbacks.full_overtime(callback, overtime)
    assert (ended.done, ended.outcome) == (True, "timed-out")
    late = ContainerEnded(execution=handle.execution, container_id=handle.container_id)
    assert callbacks.full_stopped(callback, late).answered is False
    assert answers.succeeded == []


def test_a_timed_out_wait_with_no_hold_is_an_error_not_a_pass(
    world: World, deps: tuple[CallbackDeps, Answers]
) -> None:
    callback, _ = deps
    launch = _launch(world, callback, "true")
    overtime = FullOvertime(run=launch.run, check=launch.check, wait_seconds=5)
    with pytest.raises(LookupError, match="left no held wait"):
        callbacks.full_overtime(callback, overtime)


def test_the_sample_ecs_event_names_the_task_and_its_execution() -> None:
    event = json.loads(STOPPED_SAMPLE.read_text())
    ended = container_ended(event)
    assert ended is not None
    assert ended.container_id == event["detail"]["taskArn"]
    assert ended.execution == event["detail"]["startedBy"]
    running = event | {"detail": event["detail"] | {"lastStatus": "RUNNING"}}
    assert container_ended(running) is None
    assert container_ended(event | {"detail": {"taskArn": 7}}) is None
