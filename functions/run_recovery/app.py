"""RunRecoveryFunction: execution status changes and the scheduled sweeper (see recovery)."""

import os
from typing import Any

import boto3
from forkhorse.runner import recovery
from forkhorse.runner.handlers import logger, providers


@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    deps = providers.runner()
    if event.get("detail-type") == "Step Functions Execution Status Change":
        return recovery.on_status_change(deps, event)
    return recovery.sweep(deps, boto3.client("stepfunctions"), os.environ["STATE_MACHINE_ARN"])
