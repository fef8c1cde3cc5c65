"""ApiFunction: the HTTP API's routes. Owners and agents arrive through the one Lambda
authorizer, whose resolved principal (or `anonymous`) this handler trusts."""

from __future__ import annotations

from typing import Any

from forkhorse.api.app import ForkhorseApi
from forkhorse.observability import api_keys, lambda_handler
from forkhorse.wiring.aws import build_aws_api

_api: ForkhorseApi | None = None


@lambda_handler(api_keys)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _api
    if _api is None:
        _api = build_aws_api()
    return _api.handle(event, context)
