"""GitStore port: one project's canonical repository and forks, read by exact SHA only.

Objects are addressed by SHA and never resolved through a branch ref; refs change only by
compare-and-set. Canonical refs change only with a `CanonicalWriteCapability`, which only
the promote path mints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Protocol

from forkhorse.domain.git_access import CanonicalWriteCapability
from forkhorse.domain.snapshot import FileStat, SnapshotBudget

DEFAULT_BRANCH = "refs/heads/main"
ARCHIVE_URL_TTL_SECONDS = 180


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: tuple[str, ...]


@dataclass(frozen=True)
class TreeEntry:
    name: bytes
    mode: int
    sha: str


@dataclass(frozen=True)
class ArchiveLink:
    """Where a full check fetches one snapshot's exact tree as a tar archive."""

    tree: str
    url: str
    expires_in_seconds: int


class SnapshotReader(Protocol):
    """One check's view of one snapshot; every call charges that check's budget."""

    @property
    def commit(self) -> str: ...

    def read(self, path: str) -> str | None: ...

    def stat(self, path: str) -> FileStat | None: ...

    def list(self, prefix: str) -> list[str]: ...


class Snapshot(Protocol):
    """One exact commit, immutable by SHA, with its validated tree metadata cached."""

    @property
    def commit(self) -> str: ...

    @property
    def tree(self) -> str: ...

    def reader(self, budget: SnapshotBudget) -> SnapshotReader: ...

    def export_to(self, dest_dir: Path, deadline: float | None = None) -> None:
        """Write the exact tree under `ExportLimits`, by `deadline` (`time.monotonic`).

        Raises ExportLimitExceeded or ExportTimedOut and leaves nothing behind.
        """
        ...

    def export_tar(self, dest: IO[bytes], deadline: float | None = None) -> None:
        """Stream the exact tree as a tar archive, bounded as `export_to`."""
        ...


class GitStore(Protocol):
    """The repositories of one project: canonical plus forks, sharing one object store."""

    @property
    def project(self) -> str: ...

    def create_canonical(self) -> None: ...

    def create_fork(self, fork: str) -> str | None:
        """Create a fork at the canonical head; return that head (None while empty)."""
        ...

    def exists(self, fork: str | None = None) -> bool: ...

    def refs(self, fork: str | None = None) -> dict[str, str]: ...

    def head(self, fork: str | None = None, ref: str = DEFAULT_BRANCH) -> str | None: ...

    def read_commit(self, sha: str) -> CommitInfo: ...

    def read_tree(self, sha: str) -> tuple[TreeEntry, ...]: ...

    def read_blob(self, sha: str) -> bytes: ...

    def update_fork_ref(self, fork: str, ref: str, old: str | None, new: str | None) -> bool:
        """Compare-and-set a fork ref; None means absent. False when `old` no longer holds."""
        ...

    def update_canonical_ref(
        self, capability: CanonicalWriteCapability, ref: str, old: str | None, new: str | None
    ) -> bool:
        """Compare-and-set a canonical ref with the promote path's capability."""
        ...

    def open_snapshot(self, commit: str) -> Snapshot: ...

    def publish_archive(self, commit: str, deadline: float | None = None) -> ArchiveLink:
        """Store the exact tree's tar archive and return a link valid for 180 seconds.

        The archive is bounded as `Snapshot.export_tar`; a refused one is not stored.
        """
        ...


class GitHost(Protocol):
    """Every project's repositories; `store(project)` scopes to one project."""

    def store(self, project: str) -> GitStore: ...


@dataclass(frozen=True)
class PackCollection:
    """What collecting one project's pack data removed: packs by name, and the bytes that
    freed (net of any consolidated pack written in their place)."""

    packs: list[str] = field(default_factory=list)
    bytes_reclaimed: int = 0


class ReachTooLarge(RuntimeError):
    """The tips reach more objects than a walk may hold: a collector keeps that project's
    packs and says so."""


class PackCollector(Protocol):
    """Drops a project's pack data that no tip reaches and that was stored before a time."""

    def collect_packs(
        self,
        project_id: str,
        forks: Iterable[str],
        extra_tips: Iterable[str],
        written_before: datetime,
        *,
        dry_run: bool,
    ) -> PackCollection: ...
