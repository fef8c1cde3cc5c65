"""The AWS Orchestrator: one ReceiptRun Step Functions execution per generation."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from forkhorse.domain.run import RunRef

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
SUPERSEDED_CAUSE = "A newer execution of this review superseded this one."
HISTORY_PAGE = 1000


class StepFunctionsOrchestrator:
    """Executions are named by their generation, so a generation can start only once."""

    def __init__(
        self,
        client: SFNClient,
        state_machine_arn: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._machine = state_machine_arn
        self._sleep = sleep

    def execution_arn(self, run: RunRef) -> str:
        prefix, _, name = self._machine.rpartition(":stateMachine:")
        return f"{prefix}:execution:{name}:{run.generation}"

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
        events: list[dict[str, Any]] = []
        arguments: dict[str, Any] = {
            "executionArn": self.execution_arn(run),
            "maxResults": HISTORY_PAGE,
        }
        while True:
            page = self._client.get_execution_history(**arguments)
            events.extend(_wire(event) for event in page["events"])
            if "nextToken" not in page:
                return events
            arguments["nextToken"] = page["nextToken"]


def _wire(event: Any) -> dict[str, Any]:
    """The event as JSON, timestamps in ISO form, like the local history."""
    wired = dict(event)
    wired["timestamp"] = event["timestamp"].isoformat()
    return wired
