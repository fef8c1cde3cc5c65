"""The AWS crash-point campaign: the same path (push → review → run → attach → approve →
promote, required mode) on moto's DynamoDB and Step Functions with the real ASL and step
handlers (see tests/integration/promote/conftest.py), the DynamoDB Store and the git stores
`Faulty` in every handler and API container. Each crash point fails one write, before or
after it lands, with an exception (a Lambda dying mid-step reports just that); then
RunRecoveryFunction gets the status change of every execution that ended badly, as
EventBridge delivers it, and the invariants must hold, before and after the path is
finished as a user would."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.ports.orchestrator import INTERRUPTED
from forkhorse.service.errors import ServiceError
from forkhorse.service.identity import Caller
from forkhorse.wiring import aws as aws_wiring
from forkhorse.wiring.handlers import providers

from tests.integration.faults.invariants import Deployment, check_invariants, complete
from tests.support.aws import load_function
from tests.support.faults import (
    CrashPoint,
    FaultPlan,
    Faulty,
    InjectedFault,
    PathWrite,
    crash_points,
)
from tests.support.gitrepo import commit_files
from tests.support.lambda_context import FakeLambdaContext
from tests.support.promote import OWNER, PASSING, ROOT, AwsWorld
from tests.support.step_functions import REGION

QUIET_SECONDS = 90.0

# Every write of the path, in order, with its step (the before-promote run repeats the
# review run's steps and writes).
PATH = [
    PathWrite("DiskGitStore.update_fork_ref", "push"),
    PathWrite("DynamoDbStore.create_review", "request"),  # with its running execution
    PathWrite("DynamoDbStore.update_summary", "Prepare"),  # the checks, running
    PathWrite("DynamoDbStore.update_summary", "QuickRecord"),  # the quick check's result...
    PathWrite("DynamoDbStore.put_record_chunks", "QuickRecord"),  # ...and its check record
    PathWrite("DynamoDbStore.put_record_chunks", "Finalize"),  # the receipt record...
    PathWrite("DynamoDbStore.attach", "Finalize"),  # ...attached
    PathWrite("DynamoDbStore.approve", "approve"),
    PathWrite("DynamoDbStore.request_promotion", "promote"),
    PathWrite("DynamoDbStore.acquire_lease", "PromoteAcquire"),
    PathWrite("DynamoDbStore.begin_promotion", "PromoteAcquire"),
    PathWrite("DynamoDbStore.start_execution", "PromoteStartRun"),  # the before-promote run
    PathWrite("DynamoDbStore.update_summary", "Prepare"),
    PathWrite("DynamoDbStore.update_summary", "QuickRecord"),
    PathWrite("DynamoDbStore.put_record_chunks", "QuickRecord"),
    PathWrite("DynamoDbStore.put_record_chunks", "Finalize"),
    PathWrite("DynamoDbStore.attach", "Finalize"),
    PathWrite("DynamoDbStore.arm_promotion", "PromoteVerify"),
    PathWrite("DiskGitStore.update_canonical_ref", "PromoteWrite"),
    PathWrite("DynamoDbStore.settle_promotion", "PromoteWrite"),
    PathWrite("DynamoDbStore.release_lease", "PromoteRelease"),
]
PATH_WRITES = [point.write for point in PATH]


@pytest.fixture
def faulty(aws_world: AwsWorld, monkeypatch: pytest.MonkeyPatch) -> FaultPlan:
    """Every container's Store and git host count their writes on one plan."""
    plan = FaultPlan()
    runtime, table = aws_world.runtime, os.environ["TABLE_NAME"]
    deps = providers.runner()
    git = Faulty(runtime.git, plan)

    def store() -> Faulty:
        return Faulty(DynamoDbStore(boto3.client("dynamodb", region_name=REGION), table), plan)

    monkeypatch.setattr(aws_wiring, "table_store", store)
    monkeypatch.setattr(aws_wiring, "git_host", lambda: git)
    runner = lambda: dataclasses.replace(deps, store=store(), git=git)  # noqa: E731
    monkeypatch.setattr(providers, "runner", runner)
    quick = dataclasses.replace(runtime.quick_deps, git=git)
    monkeypatch.setattr(providers, "quick", lambda: quick)
    return plan


def _ids(world: AwsWorld) -> dict[str, str]:
    lane = world.lane("agent")
    repos = world.runtime.git.store(world.project_id)
    initial = world.canonical()
    assert initial is not None
    commit = commit_files(repos, PASSING | {"README.md": "hello, promoted\n"}, parent=initial)
    return {
        "project": world.project_id,
        "agent": lane.agent.id,
        "fork": lane.fork_id,
        "packet": lane.packet_id,
        "initial": initial,
        "commit": commit,
    }


def _walk(world: AwsWorld, plan: FaultPlan, ids: dict[str, str]) -> None:
    """The path as the agent and owner drive it; it stops where a fault stops it."""
    plan.armed = True
    try:
        _steps(world, ids)
    except (InjectedFault, ServiceError):
        pass
    finally:
        _quiesce()
        plan.armed = False


def _steps(world: AwsWorld, ids: dict[str, str]) -> None:
    project, commit = ids["project"], ids["commit"]
    agent = Caller(ids["agent"], "agent")
    repos = aws_wiring.git_host().store(project)  # the agent's push: a counted write
    assert repos.update_fork_ref(ids["fork"], DEFAULT_BRANCH, ids["initial"], commit)
    service = world.service()
    review = service.reviews.request(agent, project, ids["packet"], ids["fork"], commit, False)
    review_id = review.review.id
    _quiesce()
    _recover()
    world.service().approvals.approve(OWNER, project, review_id, commit)
    status, _ = world.call("POST", f"{world.promotion_path(review_id)}/promote", {"commit": commit})
    if status == 202:
        world.settle(review_id)


def _executions() -> list[dict[str, Any]]:
    client = boto3.client("stepfunctions", region_name=REGION)
    found = []
    for machine in client.list_state_machines()["stateMachines"]:
        listed = client.list_executions(stateMachineArn=machine["stateMachineArn"])
        for execution in listed["executions"]:
            found.append(dict(client.describe_execution(executionArn=execution["executionArn"])))
    return found


def _quiesce() -> None:
    """Wait until no execution is running (each runs on moto's threads)."""
    deadline = time.monotonic() + QUIET_SECONDS
    while any(e["status"] == "RUNNING" for e in _executions()):
        assert time.monotonic() < deadline, "an execution never ended"
        time.sleep(0.1)


def _recover() -> None:
    """RunRecoveryFunction, fed the status change of every execution that ended badly."""
    for described in _executions():
        if described["status"] not in INTERRUPTED:
            continue
        event: dict[str, Any] = json.loads((ROOT / "events/sfn_status_change.json").read_text())
        detail = {key: described[key] for key in ("executionArn", "stateMachineArn", "name")}
        event["detail"] |= detail | {"status": described["status"], "input": described["input"]}
        event["resources"] = [described["executionArn"]]
        load_function("run_recovery").handler(event, FakeLambdaContext())


def _deployment(world: AwsWorld) -> Deployment:
    repos = world.runtime.git.store(world.project_id)
    return Deployment(world.service(), world.store, repos, world.clock.now())


def test_the_recorded_aws_path_is_the_listed_one(
    aws_world: AwsWorld,
    faulty: FaultPlan,
) -> None:
    ids = _ids(aws_world)
    _walk(aws_world, faulty, ids)
    assert faulty.writes == PATH_WRITES
    check_invariants(_deployment(aws_world), ids)
    assert [entry.commit for entry in aws_world.store.ledger(ids["project"])] == [ids["commit"]]


@pytest.mark.parametrize(("index", "phase"), crash_points(PATH))
def test_a_failed_write_at_every_point_keeps_the_invariants(
    aws_world: AwsWorld,
    faulty: FaultPlan,
    index: int,
    phase: str,
) -> None:
    ids = _ids(aws_world)
    faulty.crash = CrashPoint(index, phase, "raise")  # type: ignore[arg-type]
    _walk(aws_world, faulty, ids)
    assert faulty.fired, f"the path never reached write {index}: {faulty.writes}"
    assert faulty.writes[index] == PATH_WRITES[index]
    _recover()
    check_invariants(_deployment(aws_world), ids)
    complete(_deployment(aws_world), ids)
    _quiesce()
    _recover()
    check_invariants(_deployment(aws_world), ids)
