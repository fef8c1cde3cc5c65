"""The AWS Orchestrator against moto's Step Functions, running the real ReceiptRun ASL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from forkhorse.adapters.step_functions import StepFunctionsOrchestrator
from forkhorse.domain.run import RunRef

from tests.integration.runner.scenarios import SCENARIOS
from tests.integration.runner.test_step_functions_drift import (
    step_functions as step_functions,
)
from tests.support.runner import World


def test_start_wait_and_history(
    world: World, step_functions: Callable[[RunRef], dict[str, Any]]
) -> None:
    client = boto3.client("stepfunctions", region_name="us-east-1")
    machine = client.list_state_machines()["stateMachines"][0]["stateMachineArn"]
    orchestrator = StepFunctionsOrchestrator(client, machine)
    run = world.review(SCENARIOS[0].files)
    arn = orchestrator.start_run(run)
    assert arn == orchestrator.execution_arn(run)
    assert orchestrator.wait(run, 60)
    assert world.summary(run.review_id).status == "passed"
    names = [
        e["stateEnteredEventDetails"]["name"]
        for e in orchestrator.history(run)
        if "stateEnteredEventDetails" in e
    ]
    assert names[0] == "Prepare"
    assert names[-1] == "Finalize"
    assert "QuickGate" in names
    with pytest.raises(client.exceptions.ExecutionAlreadyExists):
        orchestrator.start_run(run)  # a generation starts once
