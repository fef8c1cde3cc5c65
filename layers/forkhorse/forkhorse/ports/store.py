"""Port placeholder: the owning issue defines this Protocol."""

from typing import Protocol


class Store(Protocol):
    def close(self) -> None: ...
