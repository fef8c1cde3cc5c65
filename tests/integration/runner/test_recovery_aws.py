"""AWS recovery: dead Step Functions executions become infrastructure errors (moto)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from forkhorse.adapters.step_functions import StepFunctionsOrchestrator
from forkhorse.attest.attestor import Attestor
from forkhorse.domain.run import RunRef
from forkhorse.ports.orchestrator import ExecutionEnded
from forkhorse.runner.upkeep import recovery
from forkhorse.wiring.events import execution_ended
from mypy_boto3_stepfunctions import SFNClient

from tests.support.moto_atomic import atomic_mock_aws
from tests.support.runner import World

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def sfn(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SFNClient, str]]:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")
    with atomic_mock_aws(monkeypatch):
        client = boto3.client("stepfunctions", region_name="us-east-1")
        machine = client.create_state_machine(
            name="ReceiptRun",
            definition=json.dumps(
                {"StartAt": "Hold", "States": {"Hold": {"Type": "Pass", "End": True}}}
            ),
            roleArn="arn:aws:iam::123456789012:role/receipt-run",
        )["stateMachineArn"]
        yield client, machine


def test_the_sweeper_finalizes_an_aborted_execution_once(
    world: World, sfn: tuple[SFNClient, str]
) -> None:
    client, machine = sfn
    run = _aborted(world, client, machine)

    assert (
        recovery.sweep(world.runtime.deps, StepFunctionsOrchestrator(client, machine))["finalized"]
        == 1
    )
    summary = world.summary(run.review_id)
    assert summary.status == "infrastructure-error"
    assert summary.digest is None
    assert (
        recovery.sweep(world.runtime.deps, StepFunctionsOrchestrator(client, machine))["finalized"]
        == 0
    )


def test_a_status_change_never_touches_a_newer_execution(world: World) -> None:
    older = world.review({"README": "x"})
    newer = world.restart(older.review_id, older.commit)
    event = json.loads((ROOT / "events/sfn_status_change.json").read_text())
    event["detail"]["input"] = json.dumps({"run": older.model_dump(mode="json")})
    assert recovery.on_status_change(world.runtime.deps, _ended(event)) == {"finalized": False}
    assert world.summary(newer.review_id).status == "running"
    event["detail"]["input"] = json.dumps({"run": newer.model_dump(mode="json")})
    assert recovery.on_status_change(world.runtime.deps, _ended(event)) == {"finalized": True}
    assert world.summary(newer.review_id).status == "infrastructure-error"


def _aborted(world: World, client: SFNClient, machine: str) -> RunRef:
    """A review whose ReceiptRun execution was stopped before it ended."""
    run = world.review({"README": "no checks needed"})
    execution = client.start_execution(
        stateMachineArn=machine,
        name=run.generation,
        input=json.dumps({"run": run.model_dump(mode="json")}),
    )["executionArn"]
    client.stop_execution(executionArn=execution)
    return run


def _ended(event: dict[str, Any]) -> ExecutionEnded:
    ended = execution_ended(event)
    assert ended is not None
    return ended


def test_recovery_without_the_signing_key_still_records_the_error(
    world: World, sfn: tuple[SFNClient, str]
) -> None:
    """On AWS the recovery function holds no key: the interrupted run still ends."""
    client, machine = sfn
    keyless = replace(world.runtime.deps, attestor=Attestor(world.runtime.deps.attestor.store))  # type: ignore[union-attr]
    run = _aborted(world, client, machine)
    assert recovery.sweep(keyless, StepFunctionsOrchestrator(client, machine))["finalized"] == 1
    assert world.summary(run.review_id).status == "infrastructure-error"
