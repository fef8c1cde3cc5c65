"""RunRecoveryFunction: execution status changes of ReceiptRun and PromoteRun, and the
scheduled sweeper (see recovery)."""

from typing import Any

from forkhorse.observability import lambda_handler
from forkhorse.runner.upkeep import recovery
from forkhorse.wiring.aws import execution_sweep
from forkhorse.wiring.events import execution_ended
from forkhorse.wiring.handlers import providers


@lambda_handler()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    ended = execution_ended(event)
    if ended is None:
        return recovery.sweep(providers.runner(), execution_sweep(), providers.promote())
    if recovery.is_promote(ended):
        return recovery.on_promote_status_change(providers.promote(), ended)
    return recovery.on_status_change(providers.runner(), ended)
