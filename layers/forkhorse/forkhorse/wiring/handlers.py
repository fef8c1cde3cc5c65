"""Lambda handlers for the ReceiptRun and PromoteRun steps: event in, one step, JSON out.

Handlers get their ports from `providers`, AWS's composition root by default, so tests (and
the Step Functions drift guard) dispatch the very same handlers onto local adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

from forkhorse.runner import steps
from forkhorse.runner.promote_steps import PromoteDeps
from forkhorse.wiring import aws

logger = Logger(service="forkhorse-runner")

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class _Providers:
    """Where handlers find their ports: AWS by default, replaceable in tests."""

    def __init__(self) -> None:
        self.runner: Callable[[], steps.RunnerDeps] = aws.runner_deps
        self.quick: Callable[[], steps.QuickDeps] = aws.quick_deps
        self.promote: Callable[[], PromoteDeps] = aws.promote_deps


providers = _Providers()


def trusted_step(step: Callable[[steps.RunnerDeps, dict[str, Any]], dict[str, Any]]) -> Handler:
    @logger.inject_lambda_context(log_event=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        logger.append_keys(generation=event.get("run", {}).get("generation"))
        return step(providers.runner(), event)

    return handler


def quick_step() -> Handler:
    @logger.inject_lambda_context(log_event=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return steps.quick(providers.quick(), event)

    return handler


def promote_step(step: Callable[[PromoteDeps, dict[str, Any]], dict[str, Any]]) -> Handler:
    @logger.inject_lambda_context(log_event=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        logger.append_keys(promotion=event.get("promotionId"))
        return step(providers.promote(), event)

    return handler
