"""The AWS Orchestrator: one ReceiptRun Step Functions execution per generation, and one
PromoteRun execution per promotion (which runs its before-promote ReceiptRun nested)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from forkhorse.domain.run import RunRef
from forkhorse.ports.orchestrator import INTERRUPTED, ExecutionLink, Workflow

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
SUPERSEDED_CAUSE = "A newer execution of this review superseded this one."
HISTORY_PAGE = 1000
SWEEP_PAGE = 100
CAUSE_LIMIT = 32768  # SendTaskFailure's cause, in characters
RUNNING_PAGE = 1000


class StepFunctionsOrchestrator:
    """Receipt runs are named by their generation and promote runs by their promotion, so
    each can start only once."""

    def __init__(
        self,
        client: SFNClient,
        state_machine_arn: str,
        sleep: Callable[[float], None] = time.sleep,
        promote_machine_arn: str | None = None,
    ) -> None:
        self._client = client
        self._machine = state_machine_arn
        self._promote_machine = promote_machine_arn
        self._sleep = sleep

    def execution_arn(self, run: RunRef) -> str:
        return _execution_arn(self._machine, run.generation)

    def promote_execution_arn(self, project_id: str, promotion_id: str) -> str:
        """Promotion ids are unique across projects: the name is the promotion's id."""
        return _execution_arn(self._promote_machine_arn(), promotion_id)

    def run_execution(self, run: RunRef) -> ExecutionLink:
        return _link(self.execution_arn(run))

    def promote_execution(self, project_id: str, promotion_id: str) -> ExecutionLink:
        return _link(self.promote_execution_arn(project_id, promotion_id))

    def _promote_machine_arn(self) -> str:
        if self._promote_machine is None:
            raise RuntimeError("PROMOTE_STATE_MACHINE_ARN is not configured")
        return self._promote_machine

    def start_promote(self, project_id: str, promotion_id: str) -> str:
        """The PromoteRun execution named by the promotion, so it can start only once; the
        input names the promotion and nothing else (everything is read from the Store)."""
        try:
            started = self._client.start_execution(
                stateMachineArn=self._promote_machine_arn(),
                name=promotion_id,
                input=json.dumps({"projectId": project_id, "promotionId": promotion_id}),
            )
        except self._client.exceptions.ExecutionAlreadyExists:
            return self.promote_execution_arn(project_id, promotion_id)  # started already
        return started["executionArn"]

    def start_run(self, run: RunRef) -> str:
        started = self._client.start_execution(
            stateMachineArn=self._machine,
            name=run.generation,
            input=json.dumps({"run": run.model_dump(mode="json")}),
        )
        return started["executionArn"]

    def cancel_run(self, run: RunRef) -> bool:
        """StopExecution. Its Fargate task is destroyed by the sweeper (its execution is no
        longer running), and the status rule finds the generation stale, so nothing attaches."""
        try:
            self._client.stop_execution(
                executionArn=self.execution_arn(run), error="Superseded", cause=SUPERSEDED_CAUSE
            )
        except self._client.exceptions.ExecutionDoesNotExist:
            log.info("superseded execution %s does not exist", run.generation)
            return False
        return True

    def wait(self, run: RunRef, timeout_seconds: float) -> bool:
        deadline = time.monotonic() + timeout_seconds
        while True:
            status = self._client.describe_execution(executionArn=self.execution_arn(run))
            if status["status"] != "RUNNING":
                return True
            if time.monotonic() >= deadline:
                return False
            self._sleep(POLL_SECONDS)

    def history(self, run: RunRef) -> list[dict[str, Any]]:
        return self._history(self.execution_arn(run))

    def promote_history(self, project_id: str, promotion_id: str) -> list[dict[str, Any]]:
        """The PromoteRun execution's events; none before it started."""
        try:
            return self._history(self.promote_execution_arn(project_id, promotion_id))
        except self._client.exceptions.ExecutionDoesNotExist:
            return []

    def interrupted_inputs(self, workflow: Workflow) -> Iterator[str]:
        """The inputs of the machine's most recent FAILED, TIMED_OUT and ABORTED executions."""
        machine = self._machine if workflow == "receipt" else self._promote_machine_arn()
        for status in INTERRUPTED:
            listed = self._client.list_executions(
                stateMachineArn=machine,
                statusFilter=status,
                maxResults=SWEEP_PAGE,
            )
            for execution in listed["executions"]:
                described = self._client.describe_execution(executionArn=execution["executionArn"])
                yield described.get("input", "{}")

    def running_runs(self) -> frozenset[str]:
        running = self._client.list_executions(
            stateMachineArn=self._machine, statusFilter="RUNNING", maxResults=RUNNING_PAGE
        )
        return frozenset(execution["name"] for execution in running["executions"])

    def _history(self, execution_arn: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        arguments: dict[str, Any] = {"executionArn": execution_arn, "maxResults": HISTORY_PAGE}
        while True:
            page = self._client.get_execution_history(**arguments)
            events.extend(_wire(event) for event in page["events"])
            if "nextToken" not in page:
                return events
            arguments["nextToken"] = page["nextToken"]


class StepFunctionsCallbacks:
    """Answers FullStart's task tokens (SendTaskSuccess and SendTaskFailure)."""

    def __init__(self, client: SFNClient) -> None:
        self._client = client

    def succeed(self, token: str, output: dict[str, Any]) -> bool:
        try:
            self._client.send_task_success(taskToken=token, output=json.dumps(output))
        except self._gone:
            return False
        return True

    def fail(self, token: str, error: str, cause: str) -> bool:
        try:
            self._client.send_task_failure(taskToken=token, error=error, cause=cause[:CAUSE_LIMIT])
        except self._gone:
            return False
        return True

    @property
    def _gone(self) -> tuple[type[Exception], ...]:
        """The state no longer waits for this token: it timed out, or was answered."""
        errors = self._client.exceptions
        return (errors.TaskTimedOut, errors.TaskDoesNotExist, errors.InvalidToken)


def _link(execution_arn: str) -> ExecutionLink:
    """The execution's page in the AWS Step Functions console."""
    region = execution_arn.split(":")[3]
    console = (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/v2/executions/details/{execution_arn}"
    )
    return ExecutionLink(arn=execution_arn, console_url=console)


def _execution_arn(machine_arn: str, name: str) -> str:
    prefix, _, machine = machine_arn.rpartition(":stateMachine:")
    return f"{prefix}:execution:{machine}:{name}"


def _wire(event: Any) -> dict[str, Any]:
    """The event as JSON, timestamps in ISO form, like the local history."""
    wired = dict(event)
    wired["timestamp"] = event["timestamp"].isoformat()
    return wired
