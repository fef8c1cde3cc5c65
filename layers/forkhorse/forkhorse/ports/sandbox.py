"""Port placeholder: the owning issue defines this Protocol."""

from typing import Protocol


class QuickSandbox(Protocol):
    platform: str
