"""The receipt-run state machine for moto's Step Functions: the real definition with its
Lambda ARNs substituted, and the real step handlers that serve them."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from forkhorse.ports.containers import ContainerHandle, ContainerRefused

from tests.support.lambda_context import FakeLambdaContext

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "us-east-1"
# DefinitionSubstitutions name -> the function directory whose handler serves it.
FUNCTIONS = {
    "PrepareFunctionArn": "run_prepare",
    "QuickCheckFunctionArn": "quick_check",
    "QuickCheckJsFunctionArn": "quick_check",  # the same handler, in the image with node
    "QuickRecordFunctionArn": "run_quick_record",
    "FullStartFunctionArn": "run_full_start",
    "FullOvertimeFunctionArn": "run_full_overtime",
    "FinalizeFunctionArn": "run_finalize",
}


def load_handler(directory: str) -> Callable[..., dict[str, Any]]:
    """The `handler` of functions/<directory>/app.py, loaded as the Lambda runtime would."""
    spec = importlib.util.spec_from_file_location(
        f"fn_{directory}", ROOT / "functions" / directory / "app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler: Callable[..., dict[str, Any]] = module.handler
    return handler


def receipt_run_definition() -> str:
    """The real receipt_run state machine with its function ARNs substituted."""
    text = (ROOT / "statemachine/receipt_run.asl.json").read_text()
    for name, function in FUNCTIONS.items():
        text = text.replace(
            "${" + name + "}", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}"
        )
    assert "${" not in text, "every DefinitionSubstitution must be covered"
    return text


STOPPED_FUNCTION = "run_full_stopped"
STOPPED_SAMPLE = ROOT / "events" / "full_stopped.json"


class TaskStateChanges:
    """The stand-in for EventBridge's rule on ECS task state changes, which moto does not
    run: once FullStart holds a check's token, a thread waits for that check's container to
    end and invokes the real FullStopped handler with the event ECS would send (the sample,
    with this task's ARN and execution). Each invoke is counted in `invoked`."""

    def __init__(self, deps: Callable[[], Any], invoked: list[str] | None = None) -> None:
        self._deps = deps
        self._stopped = load_handler(STOPPED_FUNCTION)
        self._invoked = invoked if invoked is not None else []
        self.threads: list[threading.Thread] = []
        # Called once a container ended, before FullStopped is invoked.
        self.before_report: Callable[[], None] = lambda: None

    def wrap(self, full_start: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        """FullStart's handler, followed by the watch on the container it started."""

        def launched(event: dict[str, Any], context: Any) -> dict[str, Any]:
            answer = full_start(event, context)
            self._watch(event["run"]["generation"], event["check"]["name"])
            return answer

        return launched

    def _watch(self, generation: str, check: str) -> None:
        held = self._deps().waits.peek(generation, check)
        if held is None:
            return  # answered at once: no container runs
        handle = json.loads(held.progress)["handle"]
        thread = threading.Thread(target=self._report_end, args=(handle,), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _report_end(self, handle: dict[str, Any]) -> None:
        ended = ContainerHandle.model_validate(handle)
        if not await_container_end(self._deps().runner.containers, ended):
            return  # never reported: the state's timeout and FullOvertime take over
        self.before_report()
        event = json.loads(STOPPED_SAMPLE.read_text())
        event["resources"] = [ended.container_id]
        event["detail"] |= {"taskArn": ended.container_id, "startedBy": ended.execution}
        self._invoked.append(STOPPED_FUNCTION)
        self._stopped(event, FakeLambdaContext())


# A container is watched until this long after its deadline.
STAND_IN_GRACE_SECONDS = 30.0


def await_container_end(containers: Any, handle: ContainerHandle) -> bool:
    """Wait for the container's end, as ECS would report it: True once it ended or was
    destroyed (FullOvertime stopped it: ECS reports that stop too), False past its deadline
    and the grace."""
    give_up = handle.deadline + STAND_IN_GRACE_SECONDS
    try:
        while not containers.wait(handle, 0.2):
            if time.time() > give_up:
                return False
    except ContainerRefused:
        return True
    return True
