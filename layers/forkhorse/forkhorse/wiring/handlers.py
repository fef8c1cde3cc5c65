"""Lambda handlers for the ReceiptRun and PromoteRun steps: the event validated into the
step's input contract, one step, its output contract dumped as the state machine's JSON.

Handlers get their ports from `providers`, AWS's composition root by default, so tests (and
the Step Functions drift guard) dispatch the very same handlers onto local adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from forkhorse.observability import lambda_handler, promote_keys, run_keys
from forkhorse.runner import steps
from forkhorse.runner.contracts import input_model, parse_step_input, to_wire
from forkhorse.runner.promote_steps import PromoteDeps
from forkhorse.wiring import aws

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class _Providers:
    """Where handlers find their ports: AWS by default, replaceable in tests."""

    def __init__(self) -> None:
        self.runner: Callable[[], steps.RunnerDeps] = aws.runner_deps
        self.quick: Callable[[], steps.QuickDeps] = aws.quick_deps
        self.promote: Callable[[], PromoteDeps] = aws.promote_deps


providers = _Providers()


def _on_the_wire[D, I: BaseModel](
    step: Callable[[D, I], BaseModel],
) -> Callable[[D, dict[str, Any]], dict[str, Any]]:
    """The step between JSON ends: its input contract validated, its output dumped."""
    model: type[I] = input_model(step)  # type: ignore[assignment]

    def call(deps: D, event: dict[str, Any]) -> dict[str, Any]:
        return to_wire(step(deps, parse_step_input(model, event)))

    return call


def trusted_step[I: BaseModel](step: Callable[[steps.RunnerDeps, I], BaseModel]) -> Handler:
    wired = _on_the_wire(step)

    @lambda_handler(run_keys)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return wired(providers.runner(), event)

    return handler


def quick_step() -> Handler:
    wired = _on_the_wire(steps.quick)

    @lambda_handler(run_keys)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return wired(providers.quick(), event)

    return handler


def promote_step[I: BaseModel](step: Callable[[PromoteDeps, I], BaseModel]) -> Handler:
    wired = _on_the_wire(step)

    @lambda_handler(promote_keys)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return wired(providers.promote(), event)

    return handler
