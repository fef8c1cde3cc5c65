"""Port placeholder: the owning issue defines this Protocol."""

from typing import Protocol


class EventBus(Protocol):
    def publish(self, detail_type: str, detail: dict[str, object]) -> None: ...
