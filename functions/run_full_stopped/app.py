"""FullStoppedFunction: ECS task state changes (STOPPED) answer the FullStart state that
waits for the task (see forkhorse.runner.workflow.callbacks.full_stopped)."""

from typing import Any

from forkhorse.observability import lambda_handler
from forkhorse.runner.workflow import callbacks
from forkhorse.wiring.events import container_ended
from forkhorse.wiring.handlers import providers


@lambda_handler()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    ended = container_ended(event)
    if ended is None:
        return {"answered": False}
    return callbacks.full_stopped(providers.callbacks(), ended).model_dump(mode="json")
