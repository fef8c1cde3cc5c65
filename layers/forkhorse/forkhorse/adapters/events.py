"""EventBus adapters: an in-process bus for local mode and EventBridge `PutEvents` on AWS."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from forkhorse.ports.events import EVENT_SOURCE, EventHandler

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient


class EventPublishFailed(RuntimeError):
    """EventBridge did not accept the event."""


class InProcessEventBus:
    """Runs each subscribed handler synchronously, in subscription order; keeps a log."""

    def __init__(self) -> None:
        self._handlers: defaultdict[str, list[EventHandler]] = defaultdict(list)
        self._lock = threading.Lock()
        self.published: list[tuple[str, dict[str, object]]] = []

    def subscribe(self, detail_type: str, handler: EventHandler) -> None:
        with self._lock:
            self._handlers[detail_type].append(handler)

    def publish(self, detail_type: str, detail: Mapping[str, object]) -> None:
        frozen = dict(detail)
        with self._lock:
            self.published.append((detail_type, frozen))
            handlers = list(self._handlers[detail_type])
        for handler in handlers:
            handler(frozen)


class EventBridgeBus:
    """Publishes one event per call with `PutEvents`; a rejected entry raises."""

    def __init__(
        self, client: EventBridgeClient, bus_name: str = "default", source: str = EVENT_SOURCE
    ) -> None:
        self._client = client
        self._bus_name = bus_name
        self._source = source

    def publish(self, detail_type: str, detail: Mapping[str, object]) -> None:
        entry: Any = {
            "Source": self._source,
            "DetailType": detail_type,
            "Detail": json.dumps(dict(detail), sort_keys=True, separators=(",", ":")),
            "EventBusName": self._bus_name,
        }
        response = self._client.put_events(Entries=[entry])
        if response.get("FailedEntryCount", 0):
            raise EventPublishFailed("EventBridge rejected the event.")
