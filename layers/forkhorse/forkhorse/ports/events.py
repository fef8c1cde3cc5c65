"""EventBus port: domain events such as `forkhorse.push`, in-process locally, EventBridge on AWS."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from pydantic import BaseModel, ConfigDict

PUSH_EVENT = "forkhorse.push"
EVENT_SOURCE = "forkhorse"


class PushDetail(BaseModel):
    """A `forkhorse.push` event's detail: one ref of one fork moved (git's HTTP edge
    publishes it; unknown keys are ignored so a newer publisher never breaks a reader)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    project: str
    fork: str
    ref: str
    old: str | None = None  # None: the push created the ref
    new: str | None = None  # None: the push deleted it
    pusher: str | None = None
    at: str | None = None


EventHandler = Callable[[Mapping[str, object]], None]


class EventBus(Protocol):
    def publish(self, detail_type: str, detail: Mapping[str, object]) -> None: ...
