"""A Powertools HTTP API resolver that routes concurrent requests.

Powertools keeps the request being routed on class attributes of `BaseRouter`
(`current_event`, `lambda_context`) and in the resolver's `context` dict, so a single
resolver can only route one request at a time. This one reads all three from per-thread
state: waitress's threads route and run the service concurrently, and no request sees
another's event or caller.
"""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2


class _RequestState(threading.local):
    def __init__(self) -> None:
        self.event: APIGatewayProxyEventV2 | None = None
        self.lambda_context: Any = None
        self.context: dict[str, Any] = {}


class ThreadLocalResolver(APIGatewayHttpResolver):
    def __init__(self, **options: Any) -> None:
        self._request = _RequestState()  # before Powertools' __init__ sets `context`
        super().__init__(**options)

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        # Powertools then also sets the class attributes; reads go through the properties.
        proxy = self._to_proxy_event(event)
        assert isinstance(proxy, APIGatewayProxyEventV2)
        self._request.event, self._request.lambda_context = proxy, context
        try:
            return super().resolve(event, context)
        finally:
            self._request.event = self._request.lambda_context = None

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEventV2:
        event = self._request.event
        if event is None:
            raise RuntimeError("No request is being routed on this thread.")
        return event

    @current_event.setter
    def current_event(self, event: APIGatewayProxyEventV2) -> None:
        self._request.event = event

    @property
    def lambda_context(self) -> Any:
        return self._request.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        return self._request.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context = value
