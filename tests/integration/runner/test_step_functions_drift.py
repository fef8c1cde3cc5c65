"""Drift guard: the real receipt_run.asl.json, interpreted by moto's Step Functions, with its
Lambda tasks dispatched in-process to the real step handlers, must produce the same receipts
as the local supervisor for every scenario."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb.waits import DynamoDbFullWaits
from forkhorse.adapters.step_functions import StepFunctionsCallbacks
from forkhorse.domain.receipts import ReceiptSummary
from forkhorse.domain.run import RunRef
from forkhorse.runner.workflow.callbacks import CallbackDeps
from forkhorse.wiring.handlers import providers
from moto.awslambda_simple.models import LambdaSimpleBackend

from tests.integration.runner.scenarios import SCENARIOS, Scenario
from tests.support.aws import create_table_from_template
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.runner import World
from tests.support.step_functions import (
    ACCOUNT,
    FUNCTIONS,
    REGION,
    TaskStateChanges,
    load_handler,
    receipt_run_definition,
)

EXECUTION_TIMEOUT = 120.0


@pytest.fixture
def step_functions(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[RunRef], dict[str, Any]]]:
    handlers = {function: load_handler(function) for function in FUNCTIONS.values()}
    changes = TaskStateChanges(lambda: providers.callbacks())
    handlers["run_full_start"] = changes.wrap(handlers["run_full_start"])

    def invoke(self: object, function_name: str, qualifier: object, body: Any, *_: object) -> bytes:
        handler = handlers[function_name.rsplit(":", 1)[-1]]
        return json.dumps(handler(json.loads(body), FakeLambdaContext())).encode()

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    deps = world.runtime.deps
    monkeypatch.setattr(providers, "runner", lambda: deps)
    monkeypatch.setattr(providers, "quick", lambda: world.runtime.quick_deps)
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")
    config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    with atomic_mock_aws(monkeypatch, config):
        client = boto3.client("stepfunctions", region_name=REGION)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        waits = DynamoDbFullWaits(dynamodb, create_table_from_template(dynamodb))
        callbacks = CallbackDeps(deps, waits, StepFunctionsCallbacks(client))
        monkeypatch.setattr(providers, "callbacks", lambda: callbacks)
        machine = client.create_state_machine(
            name="ReceiptRun",
            definition=receipt_run_definition(),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/receipt-run",
        )["stateMachineArn"]

        def execute(run: RunRef) -> dict[str, Any]:
            started = client.start_execution(
                stateMachineArn=machine,
                name=run.generation,
                input=json.dumps({"run": run.model_dump(mode="json")}),
            )
            deadline = time.monotonic() + EXECUTION_TIMEOUT
            while time.monotonic() < deadline:
                described = client.describe_execution(executionArn=started["executionArn"])
                if described["status"] != "RUNNING":
                    return dict(described)
                time.sleep(0.2)
            pytest.fail("the state machine did not finish")

        yield execute


def _comparable(world: World, review_id: str) -> dict[str, Any] | None:
    """What a user sees of a receipt, minus what differs between any two runs."""
    summary: ReceiptSummary | None = world.summary(review_id)
    if summary is None:
        return None
    seen: dict[str, Any] = {
        "status": summary.status,
        "attached": summary.digest is not None,
        "checks": [(c.name, c.tier, c.runtime, c.outcome, c.message) for c in summary.checks],
    }
    if summary.digest is not None:
        record = world.record(review_id)
        seen["evidence"] = (record.evidence, record.platform)
        seen["records"] = [
            (c.name, c.outcome, c.image_digest, c.message, c.stdout.text, c.stderr.text)
            for c in record.checks
        ]
    return seen


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_step_functions_matches_the_local_supervisor(
    world: World,
    step_functions: Callable[[RunRef], dict[str, Any]],
    scenario: Scenario,
) -> None:
    local = world.review(scenario.files)
    world.run(local)
    remote = world.review(scenario.files)
    execution = step_functions(remote)
    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    assert _comparable(world, remote.review_id) == _comparable(world, local.review_id)
    assert _comparable(world, local.review_id) is not None or scenario.status is None
