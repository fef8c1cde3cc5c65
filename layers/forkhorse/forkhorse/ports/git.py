"""Port placeholder: the owning issue defines this Protocol."""

from typing import Protocol


class Snapshot(Protocol):
    commit: str


class GitStore(Protocol):
    def snapshot(self, commit: str) -> Snapshot: ...
