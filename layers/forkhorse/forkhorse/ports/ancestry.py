"""CommitAncestry port: whether one commit is an ancestor of another, at a bounded cost.

The gate (which the console polls) and promote ask whether canonical's head is an ancestor
of the reviewed commit. An agent chooses how much history lies between the two, so the
answer must not cost a walk of that history on every question.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from forkhorse.ports.git import GitStore

Node = tuple[int, tuple[str, ...]]  # a commit's generation, and its parents


class HistoryTooLong(RuntimeError):
    """Answering would read more new commits than one question may; what was read is kept,
    so asking again goes on from there."""


class CommitAncestry(Protocol):
    def is_ancestor(self, repos: GitStore, ancestor: str, descendant: str) -> bool:
        """Whether `ancestor` is reachable from `descendant` in `repos` (a commit is its own
        ancestor). Raises SnapshotUnavailable when either is not a commit of `repos`, and
        HistoryTooLong past the walk's bound."""
        ...


class MemoSession(Protocol):
    """One question's view of one project's memo."""

    def node(self, sha: str) -> Node | None: ...

    def answer(self, ancestor: str, descendant: str) -> bool | None: ...

    def remember(self, nodes: Mapping[str, Node], answers: Mapping[tuple[str, str], bool]) -> None:
        """Keep what one question learned (also when it stopped at its bound)."""
        ...


class AncestryMemo(Protocol):
    def session(self, project: str) -> AbstractContextManager[MemoSession]: ...
