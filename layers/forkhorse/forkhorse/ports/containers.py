"""Port placeholder: the owning issue defines this Protocol."""

from typing import Protocol


class ContainerPort(Protocol):
    platform: str
