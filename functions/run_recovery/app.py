"""RunRecoveryFunction: execution status changes of ReceiptRun and PromoteRun, and the
scheduled sweeper (see recovery)."""

from typing import Any

import boto3
from forkhorse.observability import lambda_handler
from forkhorse.runner.upkeep import recovery
from forkhorse.wiring.aws import recovery_machines
from forkhorse.wiring.handlers import providers

STATUS_CHANGE = "Step Functions Execution Status Change"


@lambda_handler()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("detail-type") != STATUS_CHANGE:
        machine, promote_machine = recovery_machines()
        promotes = (providers.promote(), promote_machine)
        return recovery.sweep(providers.runner(), boto3.client("stepfunctions"), machine, promotes)
    if recovery.is_promote(event):
        return recovery.on_promote_status_change(providers.promote(), event)
    return recovery.on_status_change(providers.runner(), event)
