"""Lambda handlers for the ReceiptRun and PromoteRun steps: event in, one step, JSON out.

Handlers get their ports from `providers`, AWS's composition root by default, so tests (and
the Step Functions drift guard) dispatch the very same handlers onto local adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forkhorse.observability import lambda_handler, promote_keys, run_keys
from forkhorse.runner import steps
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


def trusted_step(step: Callable[[steps.RunnerDeps, dict[str, Any]], dict[str, Any]]) -> Handler:
    @lambda_handler(run_keys)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return step(providers.runner(), event)

    return handler


def quick_step() -> Handler:
    @lambda_handler(run_keys)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return steps.quick(providers.quick(), event)

    return handler


def promote_step(step: Callable[[PromoteDeps, dict[str, Any]], dict[str, Any]]) -> Handler:
    @lambda_handler(promote_keys)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return step(providers.promote(), event)

    return handler
