"""PushFunction: EventBridge `forkhorse.push` events move reviews that follow their fork."""

from __future__ import annotations

from typing import Any

from forkhorse.observability import lambda_handler
from forkhorse.service.facade import Service
from forkhorse.wiring.aws import build_aws_service
from forkhorse.wiring.events import push_detail

_service: Service | None = None


@lambda_handler()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _service
    push = push_detail(event)
    if push is None:
        return {"moved": []}
    if _service is None:
        _service = build_aws_service()
    return {"moved": _service.reviews.on_push(push)}
