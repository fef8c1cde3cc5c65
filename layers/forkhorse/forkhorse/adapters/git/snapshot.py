"""Snapshot reader over any dulwich object store: one exact commit, read by SHA only.

Branch refs are never consulted. Every tree is validated when first fetched and cached for
the snapshot's lifetime (snapshots are immutable by SHA). An unsafe tree (a name that is
not UTF-8, empty, `.`, `..`, `.git` in any case, holds `/`, a backslash or a control
character, a duplicate name, an unknown mode) or a missing object fails closed with
`SnapshotUnavailable`. Symlinks and submodules are never followed; executable files
are regular files.

Walks charge what they visit. `list` charges every tree entry it walks, every time, so a
subtree reached through many names (a tree bomb) costs what it expands to; the walk is a
generator that stops at the first entry or path past the budget, never building the list
first. The exports measure every path and byte against `ExportLimits` before writing any
(headers only), charge them again as they write, and check the check's deadline before
every entry.

`stat` materializes an 8 KiB sample and charges that, whatever the object's storage: a
whole object's sample is a prefix of its stream; a delta's is built from only the
instructions and base bytes that make its first 8 KiB (see `probe.delta_prefix`), never the
whole blob.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from dulwich.errors import ObjectFormatException
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, Tree

from forkhorse.adapters.git.gitdir import git_files
from forkhorse.adapters.git.probe import ObjectProbe, delta_prefix, probe_object, read_raw
from forkhorse.domain.limits import EXPORT, ExportLimits
from forkhorse.domain.snapshot import (
    BINARY_SAMPLE_BYTES,
    MAX_PATH_LEVELS,
    BudgetExceeded,
    ExportBudget,
    FileStat,
    MalformedText,
    SnapshotBudget,
    SnapshotUnavailable,
    is_safe_entry_name,
    validate_path,
    validate_prefix,
)

EntryKind = Literal["file", "dir", "symlink", "submodule"]

_BLOB = 3
_TREE = 2
_COMMIT = 1
_KINDS: dict[int, EntryKind] = {
    0o100644: "file",
    0o100755: "file",
    0o100664: "file",  # written by old git versions; still a regular file
    0o040000: "dir",
    0o120000: "symlink",
    0o160000: "submodule",
}
_TAR_MTIME = 0  # archives of one tree are byte-identical


@dataclass(frozen=True)
class Entry:
    name: str
    kind: EntryKind
    sha: str
    executable: bool


@dataclass(frozen=True)
class TreeListing:
    entries: tuple[Entry, ...]
    by_name: dict[str, Entry]


class DulwichSnapshot:
    """One commit's tree with validated metadata cached; safe to share across threads."""

    def __init__(self, objects: BaseObjectStore, commit: str, lock: threading.RLock) -> None:
        self._objects = objects
        self._lock = lock
        self._commit = commit
        self._trees: dict[str, TreeListing] = {}
        self._stats: dict[str, FileStat] = {}
        self._headers: dict[str, ObjectProbe] = {}
        self._tree = self._commit_tree(commit)

    @property
    def commit(self) -> str:
        return self._commit

    @property
    def tree(self) -> str:
        return self._tree

    def reader(self, budget: SnapshotBudget) -> BudgetedReader:
        return BudgetedReader(self, budget)

    def listing(self, tree_sha: str) -> TreeListing:
        """The validated entries of one tree of this snapshot, fetched at most once."""
        cached = self._trees.get(tree_sha)
        if cached is not None:
            return cached
        with self._lock:
            listing = _validated_listing(self._parse_tree(tree_sha))
        self._trees[tree_sha] = listing
        return listing

    def blob_header(self, sha: str) -> ObjectProbe:
        """Type and size from the object header only (no content), cached per blob."""
        cached = self._headers.get(sha)
        if cached is None:
            with self._lock:
                cached = probe_object(self._objects, sha, 0)
            if cached.type_num != _BLOB:
                raise SnapshotUnavailable()
            self._headers[sha] = cached
        return cached

    def blob_size(self, sha: str) -> int:
        return self.blob_header(sha).size

    def stat_bytes(self, sha: str) -> int:
        """What `blob_stat` materializes: the sample, whatever the object's storage."""
        return min(self.blob_size(sha), BINARY_SAMPLE_BYTES)

    def blob_stat(self, sha: str) -> FileStat:
        """Size and the binary flag from at most an 8 KiB sample (a delta's too)."""
        cached = self._stats.get(sha)
        if cached is None:
            header = self.blob_header(sha)
            with self._lock:
                if header.prefix is None:  # a delta: only what builds its first 8 KiB
                    sample = delta_prefix(self._objects, sha, BINARY_SAMPLE_BYTES)
                else:
                    sample = probe_object(self._objects, sha, BINARY_SAMPLE_BYTES).prefix or b""
            cached = FileStat(size=header.size, binary=b"\0" in sample)
            self._stats[sha] = cached
        return FileStat(size=cached["size"], binary=cached["binary"])

    def blob_bytes(self, sha: str) -> bytes:
        with self._lock:
            return read_raw(self._objects, sha)

    def walk(self) -> Iterator[tuple[str, Entry]]:
        """Every entry of the tree, parents before children, in tree order."""
        for _, path, entry in self._preorder():
            yield path, entry

    def _preorder(self) -> Iterator[tuple[int, str, Entry]]:
        """(level, path, entry) depth first, a directory's contents right after it.

        Lazy: a subtree is fetched only when the walk reaches it, and the walk holds one
        iterator per level, so a consumer that stops early has spent only what it saw.
        """
        stack = [("", iter(self.listing(self._tree).entries))]
        while stack:
            base, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            path = base + entry.name
            yield len(stack), path, entry
            if entry.kind == "dir":
                stack.append((path + "/", iter(self.listing(entry.sha).entries)))

    def list_files(self, prefix: str = "") -> list[str]:
        """Trusted, unbudgeted listing of regular files (for the runner and benchmarks)."""
        return sorted(
            path for path, entry in self.walk() if entry.kind == "file" and path.startswith(prefix)
        )

    def export_to(
        self, dest_dir: Path, deadline: float | None = None, limits: ExportLimits = EXPORT
    ) -> None:
        """Write the exact tree into an empty or new directory, never following a link.

        Refuses with ExportLimitExceeded before writing anything (see `measure`), or with
        ExportTimedOut (`deadline` is a `time.monotonic` reading) at any entry, and then
        removes what it wrote, so no partial checkout remains.
        """
        if dest_dir.exists() and any(dest_dir.iterdir()):
            raise FileExistsError("The export directory must be empty.")
        self.measure(deadline, limits)
        created = not dest_dir.exists()
        dest_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._write_tree(dest_dir, _ExportBlobs(self, ExportBudget(limits, deadline)))
            self._write_git_dir(dest_dir / ".git", deadline, limits)
        except BaseException:
            _remove_partial(dest_dir, created)
            raise

    def export_tar(
        self, dest: IO[bytes], deadline: float | None = None, limits: ExportLimits = EXPORT
    ) -> None:
        """Stream the exact tree as a deterministic POSIX tar archive, bounded as `export_to`.

        A tree past the limits is refused before the first byte; on a timeout the archive
        is left unfinished and the caller discards `dest`.
        """
        self.measure(deadline, limits)
        budget = ExportBudget(limits, deadline)
        blobs = _ExportBlobs(self, budget)
        with tarfile.open(fileobj=dest, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            for level, path, entry in self._preorder():
                budget.charge_path(level)
                info = _tar_info(path, entry)
                if entry.kind == "file":
                    data = blobs.charged(entry)
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))
                else:
                    if entry.kind == "symlink":
                        target = blobs.charged(entry)
                        info.linkname = target.decode("utf-8", "surrogateescape")
                    archive.addfile(info)
            for name, content in self._git_files(deadline, limits):
                archive.addfile(*_git_tar_member(name, content))

    def measure(self, deadline: float | None = None, limits: ExportLimits = EXPORT) -> None:
        """Walk the tree as an export would, writing nothing, and refuse it past a limit.

        Costs one pass over cached listings and blob headers (no content), so a tree bomb
        is refused before the export spends any disk on it.
        """
        budget = ExportBudget(limits, deadline)
        for level, _, entry in self._preorder():
            budget.charge_path(level)
            if entry.kind in ("file", "symlink"):
                budget.charge_bytes(self.blob_size(entry.sha))

    def _write_tree(self, dest_dir: Path, blobs: _ExportBlobs) -> None:
        # open_dirs[n] is the directory holding entries n + 1 levels deep.
        open_dirs = [os.open(dest_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)]
        try:
            for level, _, entry in self._preorder():
                blobs.budget.charge_path(level)
                while len(open_dirs) > level:
                    os.close(open_dirs.pop())
                child = _write_entry(open_dirs[-1], entry, blobs)
                if child is not None:
                    open_dirs.append(child)
        finally:
            for fd in open_dirs:
                os.close(fd)

    def _git_files(
        self, deadline: float | None, limits: ExportLimits
    ) -> Iterator[tuple[str, IO[bytes] | bytes | None]]:
        """The checkout's `.git`: this commit and its own history only (`gitdir`)."""
        with self._lock:
            yield from git_files(
                self._objects, self._commit, self.walk(), self.blob_size, limits, deadline
            )

    def _write_git_dir(self, git_dir: Path, deadline: float | None, limits: ExportLimits) -> None:
        git_dir.mkdir(0o755)
        for name, content in self._git_files(deadline, limits):
            target = git_dir / name
            if content is None:
                target.mkdir(0o755)
                continue
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                if isinstance(content, bytes):
                    handle.write(content)
                else:
                    shutil.copyfileobj(content, handle)
                os.fchmod(handle.fileno(), 0o644)

    def _commit_tree(self, commit: str) -> str:
        with self._lock:
            probe = probe_object(self._objects, commit, 0)
            if probe.type_num != _COMMIT:
                raise SnapshotUnavailable()
            try:
                parsed = Commit.from_string(read_raw(self._objects, commit))
            except (ObjectFormatException, ValueError) as malformed:
                raise SnapshotUnavailable() from malformed
        return str(parsed.tree.decode("ascii"))

    def _parse_tree(self, tree_sha: str) -> Tree:
        if probe_object(self._objects, tree_sha, 0).type_num != _TREE:
            raise SnapshotUnavailable()
        try:
            return Tree.from_string(read_raw(self._objects, tree_sha))
        except (ObjectFormatException, ValueError) as malformed:
            raise SnapshotUnavailable() from malformed


class _ExportBlobs:
    """One export's blob contents, each charged from its header before it is materialized.

    The last blob is kept: a tree bomb names the same blob again and again, and reading it
    once keeps the export's cost per path to writing that path.
    """

    def __init__(self, snapshot: DulwichSnapshot, budget: ExportBudget) -> None:
        self.budget = budget
        self._snapshot = snapshot
        self._last: tuple[str, bytes] = ("", b"")

    def charged(self, entry: Entry) -> bytes:
        self.budget.charge_bytes(self._snapshot.blob_size(entry.sha))
        if self._last[0] != entry.sha:
            self._last = (entry.sha, self._snapshot.blob_bytes(entry.sha))
        return self._last[1]


class BudgetedReader:
    """One check's `read`/`stat`/`list` over a snapshot; reserves budget before data."""

    def __init__(self, snapshot: DulwichSnapshot, budget: SnapshotBudget) -> None:
        self._snapshot = snapshot
        self._budget = budget
        self._fetched_trees: set[str] = set()
        self._charge_lock = threading.Lock()

    @property
    def commit(self) -> str:
        return self._snapshot.commit

    def read(self, path: str) -> str | None:
        entry = self._file_call(path)
        if entry is None:
            return self._deliver(None)
        self._budget.reserve_bytes(self._snapshot.blob_size(entry.sha))
        data = self._snapshot.blob_bytes(entry.sha)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as malformed:
            raise MalformedText() from malformed
        return self._deliver(text)

    def stat(self, path: str) -> FileStat | None:
        entry = self._file_call(path)
        if entry is None:
            return self._deliver(None)
        self._budget.reserve_bytes(self._snapshot.stat_bytes(entry.sha))
        return self._deliver(self._snapshot.blob_stat(entry.sha))

    def list(self, prefix: str) -> list[str]:
        self._budget.reserve_operations(1)
        literal = validate_prefix(prefix)
        paths: list[str] = []
        for path in self._walk_files(literal):
            self._budget.ensure_listed_paths(len(paths) + 1)  # stop at the first path past it
            paths.append(path)
        self._budget.reserve_listed_paths(len(paths))
        return self._deliver(sorted(paths))

    def _deliver[T](self, value: T) -> T:
        """Last checkpoint: a capability revoked while the call was pending delivers nothing."""
        self._budget.ensure_live()
        return value

    def _file_call(self, path: str) -> Entry | None:
        self._budget.reserve_operations(1)
        components = validate_path(path)
        tree_sha = self._snapshot.tree
        for depth, name in enumerate(components, start=1):
            entry = self._fetched(tree_sha).by_name.get(name)
            if entry is None:
                return None
            if depth == len(components):
                return entry if entry.kind == "file" else None
            if entry.kind != "dir":
                return None  # symlinks and submodules are never followed
            tree_sha = entry.sha
        return None

    def _walk_files(self, prefix: str) -> Iterator[str]:
        """Matching file paths; each tree's entries are charged before they are looked at.

        The pending stack only holds directories whose entry was already charged, so the
        walk's memory is bounded by the operations budget as well.
        """
        pending: list[tuple[str, int, str]] = [("", 1, self._snapshot.tree)]
        while pending:
            base, level, tree_sha = pending.pop()
            entries = self._visited(tree_sha).entries
            if entries and level > MAX_PATH_LEVELS:
                raise BudgetExceeded(
                    f"The snapshot has paths deeper than {MAX_PATH_LEVELS} levels."
                )
            for entry in entries:
                path = base + entry.name
                if entry.kind == "file" and path.startswith(prefix):
                    yield path
                elif entry.kind == "dir" and _may_hold(path + "/", prefix):
                    pending.append((path + "/", level + 1, entry.sha))

    def _visited(self, tree_sha: str) -> TreeListing:
        """A tree a listing walks: its entries are charged on every visit."""
        self._budget.ensure_live()
        listing = self._snapshot.listing(tree_sha)
        self._budget.reserve_operations(len(listing.entries))
        with self._charge_lock:
            self._fetched_trees.add(tree_sha)
        return listing

    def _fetched(self, tree_sha: str) -> TreeListing:
        """A tree on a `read`/`stat` path: its entries are charged once per check.

        A path lookup touches one entry per level (at most 64) and each call is charged,
        so only the first fetch of a tree costs its entries.
        """
        self._budget.ensure_live()
        listing = self._snapshot.listing(tree_sha)
        with self._charge_lock:
            if tree_sha in self._fetched_trees:
                return listing
            self._budget.reserve_operations(len(listing.entries))
            self._fetched_trees.add(tree_sha)
        return listing


def _may_hold(directory: str, prefix: str) -> bool:
    return directory.startswith(prefix) or prefix.startswith(directory)


def _validated_listing(tree: Tree) -> TreeListing:
    by_name: dict[str, Entry] = {}
    for item in tree.iteritems():
        entry = _validated_entry(item.path, item.mode, item.sha)
        if entry.name in by_name:
            raise SnapshotUnavailable()
        by_name[entry.name] = entry
    return TreeListing(tuple(by_name.values()), by_name)


def _validated_entry(raw_name: bytes, mode: int, sha: bytes) -> Entry:
    try:
        name = raw_name.decode("utf-8")
    except UnicodeDecodeError as undecodable:
        raise SnapshotUnavailable() from undecodable
    kind = _KINDS.get(mode)
    if kind is None or not is_safe_entry_name(name):
        raise SnapshotUnavailable()
    return Entry(name, kind, sha.decode("ascii"), executable=mode == 0o100755)


def _remove_partial(dest_dir: Path, created: bool) -> None:
    """Remove what a failed export wrote (and the directory, if the export made it)."""
    if created:
        shutil.rmtree(dest_dir, ignore_errors=True)
        return
    for child in dest_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _write_entry(dir_fd: int, entry: Entry, blobs: _ExportBlobs) -> int | None:
    """Write one entry; for a directory, return its open descriptor."""
    if entry.kind == "file":
        _write_file(dir_fd, entry, blobs.charged(entry))
        return None
    if entry.kind == "symlink":
        os.symlink(blobs.charged(entry), entry.name, dir_fd=dir_fd)
        return None
    os.mkdir(entry.name, 0o755, dir_fd=dir_fd)
    if entry.kind == "submodule":
        return None  # never followed: an empty directory
    return os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def _write_file(dir_fd: int, entry: Entry, data: bytes) -> None:
    mode = 0o755 if entry.executable else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(entry.name, flags, mode, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        os.fchmod(handle.fileno(), mode)  # the umask must not change the recorded mode


def _git_tar_member(
    name: str, content: IO[bytes] | bytes | None
) -> tuple[tarfile.TarInfo, IO[bytes] | None]:
    info = tarfile.TarInfo(f".git/{name}")
    info.mtime = _TAR_MTIME
    info.uname = info.gname = ""
    if content is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        return info, None
    info.type, info.mode = tarfile.REGTYPE, 0o644
    if isinstance(content, bytes):
        info.size = len(content)
        return info, io.BytesIO(content)
    info.size = content.seek(0, io.SEEK_END)
    content.seek(0)
    return info, content


def _tar_info(path: str, entry: Entry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.mtime = _TAR_MTIME
    info.uname = info.gname = ""
    if entry.kind == "file":
        info.type = tarfile.REGTYPE
        info.mode = 0o755 if entry.executable else 0o644
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.mode = 0o777
    else:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    return info


__all__ = ["BudgetedReader", "DulwichSnapshot", "Entry", "TreeListing"]
