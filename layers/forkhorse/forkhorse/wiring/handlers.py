"""Lambda handlers for the ReceiptRun and PromoteRun steps: the event validated into the
step's input contract, one step, its output contract dumped as the state machine's JSON.

Handlers get their ports from `providers`, AWS's composition root by default, so tests (and
the Step Functions drift guard) dispatch the very same handlers onto local adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from forkhorse.observability import Correlate, lambda_handler, promote_keys, run_keys
from forkhorse.runner.workflow import steps
from forkhorse.runner.workflow.callbacks import CallbackDeps
from forkhorse.runner.workflow.contracts import input_model, parse_step_input, to_wire
from forkhorse.service.promote.steps import PromoteDeps
from forkhorse.wiring import aws


class _Providers:
    """Where handlers find their ports: AWS by default, replaceable in tests."""

    def __init__(self) -> None:
        self.runner: Callable[[], steps.RunnerDeps] = aws.runner_deps
        self.quick: Callable[[], steps.QuickDeps] = aws.quick_deps
        self.promote: Callable[[], PromoteDeps] = aws.promote_deps
        self.callbacks: Callable[[], CallbackDeps] = aws.callback_deps


providers = _Providers()


class StepHandler:
    """One step's Lambda handler: the event validated into the step's input contract
    (a bad event fails before any port is built), the step run on `deps()`, its output
    dumped. `step` names the step, and so its contracts."""

    def __init__(
        self, step: Callable[[Any, Any], BaseModel], deps: Callable[[], Any], correlate: Correlate
    ) -> None:
        self.step = step
        model = input_model(step)

        @lambda_handler(correlate)
        def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
            step_input = parse_step_input(model, event)
            return to_wire(step(deps(), step_input))

        self._handle = handle

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        output: dict[str, Any] = self._handle(event, context)
        return output


def trusted_step[I: BaseModel](step: Callable[[steps.RunnerDeps, I], BaseModel]) -> StepHandler:
    return StepHandler(step, lambda: providers.runner(), run_keys)


def callback_step[I: BaseModel](step: Callable[[CallbackDeps, I], BaseModel]) -> StepHandler:
    return StepHandler(step, lambda: providers.callbacks(), run_keys)


def quick_step() -> StepHandler:
    return StepHandler(steps.quick, lambda: providers.quick(), run_keys)


def promote_step[I: BaseModel](step: Callable[[PromoteDeps, I], BaseModel]) -> StepHandler:
    return StepHandler(step, lambda: providers.promote(), promote_keys)
