"""The AWS promote path in-process: moto's DynamoDB holds the state; moto's Step Functions
interprets the real PromoteRun and ReceiptRun ASL (the before-promote run nested with
`startExecution.sync:2`), with every Lambda task dispatched to the real step handlers
(local git, bubblewrap and podman behind them, as in the drift test), each invoke with a
fresh service, as a fresh Lambda container would have. A handler's exception comes back
as Lambda reports a function error, so the machine's Retry and Catch see the real names."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.dynamodb.waits import DynamoDbFullWaits
from forkhorse.adapters.step_functions import StepFunctionsCallbacks
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.domain.model import Promotion
from forkhorse.domain.receipts import ReceiptSummary
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.runner.workflow.callbacks import CallbackDeps
from forkhorse.service.facade import Service
from forkhorse.service.identity import Caller
from forkhorse.wiring import aws as aws_wiring
from forkhorse.wiring.handlers import providers
from forkhorse.wiring.local import LocalRuntime, build_local_runtime
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (  # noqa: E501
    StateTaskServiceSfn,
)

from tests.support.aws import create_table_from_template, load_function
from tests.support.gitrepo import commit_files
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.step_functions import (
    ACCOUNT,
    FUNCTIONS,
    REGION,
    TaskStateChanges,
    load_handler,
    receipt_run_definition,
)

ROOT = Path(__file__).resolve().parents[2]
OWNER = Caller("6f1c2a8e-0b7d-4c3e-9a55-1d2e3f4a5b6c", "owner")
# DefinitionSubstitutions name -> the function directory whose handler serves it.
PROMOTE_FUNCTIONS = {
    "PromoteAcquireFunctionArn": "promote_acquire",
    "PromoteStartRunFunctionArn": "promote_start_run",
    "PromoteVerifyFunctionArn": "promote_verify",
    "PromoteWriteFunctionArn": "promote_write",
    "PromoteReleaseFunctionArn": "promote_release",
    "PromoteSettleFunctionArn": "promote_settle",
}
RECEIPT_TIMEOUT = 60.0
SETTLE_TIMEOUT = 60.0
QUICK_OK = "def check(ctx):\n    return {'ok': True, 'message': 'Quick check passed.'}\n"
QUICK_FAIL = "def check(ctx):\n    return {'ok': False, 'message': 'Quick check failed.'}\n"


def checks(module: str) -> dict[str, str | bytes]:
    return {
        ".forkhorse/checks": (
            '[{"name":"quick","tier":"quick","module":".forkhorse/quick/check.py"}]\n'
        ),
        ".forkhorse/quick/check.py": module,
    }


PASSING = checks(QUICK_OK)
FAILING = checks(QUICK_FAIL)


class ShiftClock:
    """The system clock plus an offset, shared by every handler's service."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


class Crash(Exception):
    """A step's Lambda dies after its work is done (Lambda reports an unhandled error)."""


@dataclass
class Lane:
    agent: Caller
    fork_id: str
    packet_id: str


@dataclass
class AwsWorld:
    runtime: LocalRuntime
    store: DynamoDbStore
    clock: ShiftClock
    project_id: str
    promote_machine: str = ""
    # Step directory -> called after that step's handler returns; it may raise `Crash`.
    after: dict[str, Any] = field(default_factory=dict)
    invoked: list[str] = field(default_factory=list)
    # Reports each full check's end to FullStopped (EventBridge's stand-in).
    task_changes: TaskStateChanges | None = None

    def service(self) -> Service:
        """A fresh service, wired exactly as the handlers wire theirs."""
        return aws_wiring.build_aws_service()

    # --- HTTP through the real ApiFunction ------------------------------------------
    def call(
        self, method: str, path: str, body: Any = None, api: ModuleType | None = None
    ) -> tuple[int, Any]:
        """One request to an ApiFunction container (a fresh one unless `api` is given)."""
        event = copy.deepcopy(_API_EVENT)
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["requestContext"]["http"]["method"] = method
        event["body"] = None if body is None else json.dumps(body)
        if method == "GET":
            event["headers"].pop("content-type", None)
        handler = (api or load_function("api")).handler
        response = handler(event, FakeLambdaContext())
        return response["statusCode"], json.loads(response["body"])

    def promotion_path(self, review_id: str) -> str:
        return f"/projects/{self.project_id}/reviews/{review_id}"

    def settle(self, review_id: str) -> tuple[int, Any]:
        """GET .../promotion, each time from a fresh container, until it is not 202."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            status, body = self.call("GET", f"{self.promotion_path(review_id)}/promotion")
            if status != 202 or time.monotonic() > deadline:
                return status, body
            time.sleep(0.2)

    # --- setup through the service --------------------------------------------------
    def lane(self, name: str) -> Lane:
        service = self.service()
        agent_id = service.projects.create_agent(OWNER, name).agent.id
        service.projects.add_member(OWNER, self.project_id, agent_id)
        agent = Caller(agent_id, "agent")
        fork = service.projects.create_fork(agent, self.project_id, name).fork
        packet = service.projects.create_packet(OWNER, self.project_id, name).packet
        service.projects.claim(agent, self.project_id, packet.id)
        return Lane(agent, fork.id, packet.id)

    def push(self, lane: Lane, files: dict[str, str | bytes]) -> str:
        repos = self.runtime.git.store(self.project_id)
        head = repos.head(lane.fork_id)
        commit = commit_files(repos, files, parent=head)
        assert repos.update_fork_ref(lane.fork_id, DEFAULT_BRANCH, head, commit)
        return commit

    def approved(self, lane: Lane, commit: str) -> str:
        """Request a review of `commit`, wait for its receipt and approve it."""
        service = self.service()
        review = service.reviews.request(
            lane.agent, self.project_id, lane.packet_id, lane.fork_id, commit, False
        ).review
        self.wait_receipt(review.id)
        service.approvals.approve(OWNER, self.project_id, review.id, commit)
        return review.id

    def wait_receipt(self, review_id: str) -> ReceiptSummary:
        deadline = time.monotonic() + RECEIPT_TIMEOUT
        while time.monotonic() < deadline:
            summary = self.summary(review_id)
            if summary is not None and summary.status != "running":
                return summary
            time.sleep(0.2)
        pytest.fail(f"the receipt of {review_id} is still running: {_executions()}")

    def summary(self, review_id: str) -> ReceiptSummary | None:
        review = self.store.get_review(review_id)
        assert review is not None
        return None if review.execution is None else review.execution.summary

    def summary_generation(self, review_id: str) -> str | None:
        review = self.store.get_review(review_id)
        assert review is not None
        return None if review.execution is None else review.execution.generation

    def promotions(self, review_id: str) -> list[Promotion]:
        return [p for p in self.store.list_promotions(self.project_id) if p.review_id == review_id]

    def canonical(self) -> str | None:
        return self.runtime.git.store(self.project_id).head()

    def execution(self, promotion_id: str) -> dict[str, Any]:
        """The PromoteRun execution of a promotion, once it has ended."""
        client = boto3.client("stepfunctions", region_name=REGION)
        prefix, _, name = self.promote_machine.rpartition(":stateMachine:")
        arn = f"{prefix}:execution:{name}:{promotion_id}"
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            described = dict(client.describe_execution(executionArn=arn))
            if described["status"] != "RUNNING" or time.monotonic() > deadline:
                return described
            time.sleep(0.2)


def _executions() -> list[dict[str, Any]]:
    """Each ReceiptRun execution's status and cause, to explain a run that never ended."""
    client = boto3.client("stepfunctions", region_name=REGION)
    found = []
    for machine in client.list_state_machines()["stateMachines"]:
        for execution in client.list_executions(stateMachineArn=machine["stateMachineArn"])[
            "executions"
        ]:
            described = client.describe_execution(executionArn=execution["executionArn"])
            found.append(
                {k: described.get(k) for k in ("name", "status", "error", "cause", "output")}
            )
    return found


_API_EVENT: dict[str, Any] = json.loads((ROOT / "events" / "api_promote.json").read_text())
_API_EVENT["requestContext"]["authorizer"]["lambda"]["principalId"] = OWNER.id


def promote_definition(receipt_machine: str) -> str:
    text = (ROOT / "statemachine/promote.asl.json").read_text()
    for name, function in PROMOTE_FUNCTIONS.items():
        arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}"
        text = text.replace("${" + name + "}", arn)
    text = text.replace("${ReceiptRunStateMachineArn}", receipt_machine)
    assert "${" not in text, "every DefinitionSubstitution must be covered"
    return text


def create_machines() -> tuple[str, str]:
    """The ReceiptRun and PromoteRun machines, from the real definitions."""
    client = boto3.client("stepfunctions", region_name=REGION)
    receipt = client.create_state_machine(
        name="ReceiptRun",
        definition=receipt_run_definition(),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/run",
    )["stateMachineArn"]
    promote = client.create_state_machine(
        name="PromoteRun",
        definition=promote_definition(receipt),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/promote",
    )["stateMachineArn"]
    return receipt, promote


def lambda_dispatch(handlers: dict[str, Any], after: dict[str, Any], invoked: list[str]) -> Any:
    """moto's Lambda invoke: the named handler runs synchronously; an exception becomes
    Lambda's function-error payload, named by its type, as the Python runtime reports it."""

    def invoke(
        self: object,
        function_name: str,
        qualifier: object,
        body: Any,
        headers: Any,
        response_headers: dict[str, str],
        *_: object,
    ) -> bytes:
        name = function_name.rsplit(":", 1)[-1]
        invoked.append(name)
        try:
            result = handlers[name](json.loads(body), FakeLambdaContext())
            if name in after:
                after[name]()
        except Exception as error:
            response_headers["x-amz-function-error"] = "Unhandled"
            failure = {"errorMessage": str(error), "errorType": type(error).__name__}
            return json.dumps({**failure, "stackTrace": []}).encode()
        return json.dumps(result).encode()

    return invoke


# moto's interpreter leaves a service task's Parameters in the ASL's PascalCase, which boto
# cannot serialize, and hands boto's camelCase responses back unchanged (its LocalStack
# origin normalizes both; moto's copy does not). The real definition keeps AWS's names;
# these two shims translate at the call and the response, nothing more.
_BOTO_START_EXECUTION = {"StateMachineArn": "stateMachineArn", "Name": "name", "Input": "input"}
_sfn_normalise = StateTaskServiceSfn._normalise_parameters


def _boto_parameters(
    self: StateTaskServiceSfn,
    parameters: dict[str, Any],
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    _sfn_normalise(self, parameters, boto_service_name, service_action_name)
    for asl, boto in _BOTO_START_EXECUTION.items():
        if asl in parameters:
            parameters[boto] = parameters.pop(asl)


def _aws_response(
    self: StateTaskServiceSfn,
    response: Any,
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    if isinstance(response, dict):
        for key in list(response):
            response[key[:1].upper() + key[1:]] = response.pop(key)


def all_handlers() -> dict[str, Any]:
    directories = [*FUNCTIONS.values(), *PROMOTE_FUNCTIONS.values()]
    return {directory: load_handler(directory) for directory in directories}


@pytest.fixture
def aws_world(
    tmp_path: Path,
    busybox_ref: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[AwsWorld]:
    registry = ImageRegistry(tmp_path / "images")
    registry.record("busybox", busybox_ref)
    runtime = build_local_runtime(tmp_path / "home", images=registry)
    clock = ShiftClock()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "BUCKET_NAME": "unused-git-is-on-disk",
        "PUBLIC_URL": "https://abc123.execute-api.us-east-1.amazonaws.com",
        # Far below the run's length: every required promote outlasts its request.
        "PROMOTE_WAIT_SECONDS": "0.2",
    }.items():
        monkeypatch.setenv(name, value)
    config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    with atomic_mock_aws(monkeypatch, config):
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        table = create_table_from_template(dynamodb)
        store = DynamoDbStore(dynamodb, table)
        receipt, promote = create_machines()
        monkeypatch.setenv("TABLE_NAME", table)
        monkeypatch.setenv("STATE_MACHINE_ARN", receipt)
        monkeypatch.setenv("PROMOTE_STATE_MACHINE_ARN", promote)
        # The handlers' services: git on disk (shared with the step handlers), our clock.
        monkeypatch.setattr(aws_wiring, "git_host", lambda: runtime.git)
        monkeypatch.setattr(aws_wiring, "SystemClock", lambda: clock)
        # The step handlers: the same table, local git, bubblewrap and podman.
        deps = dataclasses.replace(runtime.deps, store=store)
        monkeypatch.setattr(providers, "runner", lambda: deps)
        monkeypatch.setattr(providers, "quick", lambda: runtime.quick_deps)
        world = AwsWorld(runtime, store, clock, project_id="", promote_machine=promote)
        # Each promote step gets a fresh service: no state survives between invokes.
        monkeypatch.setattr(providers, "promote", lambda: world.service().context)
        waits = DynamoDbFullWaits(dynamodb, table)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        callbacks = CallbackDeps(deps, waits, StepFunctionsCallbacks(sfn))
        monkeypatch.setattr(providers, "callbacks", lambda: callbacks)
        handlers = all_handlers()
        world.task_changes = TaskStateChanges(lambda: providers.callbacks(), world.invoked)
        handlers["run_full_start"] = world.task_changes.wrap(handlers["run_full_start"])
        dispatch = lambda_dispatch(handlers, world.after, world.invoked)
        monkeypatch.setattr(LambdaSimpleBackend, "invoke", dispatch)
        monkeypatch.setattr(StateTaskServiceSfn, "_normalise_parameters", _boto_parameters)
        monkeypatch.setattr(StateTaskServiceSfn, "_normalise_response", _aws_response)
        service = world.service()
        project = service.projects.create_project(OWNER, "proj", True).project
        world.project_id = project.id
        repos = runtime.git.store(world.project_id)
        initial = commit_files(repos, {"README.md": "hello\n"})
        assert repos.update_canonical_ref(
            _capability(world.project_id), DEFAULT_BRANCH, None, initial
        )
        try:
            yield world
        finally:
            runtime.close()


def _capability(project_id: str) -> Any:
    """The test's initial import; the service itself never writes canonical but to promote."""
    return mint_canonical_write_capability(project_id)
