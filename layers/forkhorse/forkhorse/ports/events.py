"""EventBus port: domain events such as `forkhorse.push`, in-process locally, EventBridge on AWS."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

PUSH_EVENT = "forkhorse.push"
EVENT_SOURCE = "forkhorse"

EventHandler = Callable[[Mapping[str, object]], None]


class EventBus(Protocol):
    def publish(self, detail_type: str, detail: Mapping[str, object]) -> None: ...
