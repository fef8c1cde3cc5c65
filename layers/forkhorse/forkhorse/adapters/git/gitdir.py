"""A full check's `.git`: the exact commit as a detached HEAD, with its own history only.

The export writes a minimal repository next to the tree, so `git rev-parse HEAD` is the
reviewed commit, `git status --porcelain` is empty and `git log` / `git describe` walk the
commit's history:

- `HEAD` holds the commit's SHA (detached); `refs/heads` and `refs/tags` are empty; no
  remote, no alternates, no hooks.
- `objects/pack/pack-<sum>.{pack,idx}` holds ONLY objects reachable from the commit: it is
  built by walking the commit's parents and trees, never by copying the project's object
  store (which holds every fork's objects), so no other fork's object can be in it.
- `index` lists the commit's tree with zeroed stat data and true sizes: git re-hashes each
  file once (the stat data never matches a fresh checkout) and finds it clean.
- The history is bounded by `ExportLimits.history_commits` and `history_bytes` (raw object
  content, the commit's own tree included). The walk is breadth first from the commit; at
  the first commit that would pass a bound it stops, and `shallow` lists every kept commit
  with a parent left out, so git treats them as roots: `git log` works up to that boundary
  (as in a `git clone --depth`). A parent missing from the store is a boundary too.

The pack and index are deterministic for one commit and limits, so archives are
byte-identical.
"""

from __future__ import annotations

import hashlib
import struct
import tempfile
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Protocol

from dulwich.errors import ObjectFormatException
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, Tree

from forkhorse.adapters.git.probe import probe_object, read_raw
from forkhorse.domain.limits import ExportLimits
from forkhorse.domain.snapshot import ExportTimedOut, SnapshotUnavailable

_COMMIT, _TREE, _BLOB = 1, 2, 3
_GITLINK = 0o160000
_SPOOL_BYTES = 8 * 1024 * 1024  # a pack larger than this is spooled to a temporary file
_COMPRESSION = 1  # fast: the pack lives for one run

CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
DIRECTORIES = ("objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags")


class IndexEntry(Protocol):
    """What the index needs of one tree entry (`snapshot.Entry` plus its path)."""

    @property
    def kind(self) -> str: ...

    @property
    def sha(self) -> str: ...

    @property
    def executable(self) -> bool: ...


@dataclass
class History:
    """The objects one `.git` holds, in pack order, and the shallow boundary."""

    objects: list[tuple[str, int]] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    shallow: list[str] = field(default_factory=list)
    bytes: int = 0


class _OverBudget(Exception):
    pass


def plan_history(
    objects: BaseObjectStore, commit: str, limits: ExportLimits, deadline: float | None
) -> History:
    """The commit and as much of its history as the limits allow (see the module)."""
    history = History()
    seen: set[str] = set()
    kept: set[str] = set()
    parents_of: dict[str, list[str]] = {}
    queue = deque([commit])
    queued = {commit}
    while queue:
        _check_deadline(deadline)
        sha = queue.popleft()
        if len(history.commits) >= limits.history_commits:
            break
        first = not history.commits
        budget = None if first else limits.history_bytes - history.bytes
        try:
            parsed, found = _closure(objects, sha, seen, budget, deadline)
        except _OverBudget:
            break
        except SnapshotUnavailable:
            if first:
                raise
            continue  # a parent missing from the store: its child becomes a boundary
        seen.update(oid for oid, _, _ in found)
        history.objects.extend((oid, kind) for oid, kind, _ in found)
        history.bytes += sum(size for _, _, size in found)
        history.commits.append(sha)
        kept.add(sha)
        parents = [parent.decode("ascii") for parent in parsed.parents]
        parents_of[sha] = parents
        for parent in parents:
            if parent not in queued:
                queued.add(parent)
                queue.append(parent)
    history.shallow = sorted(
        sha for sha in history.commits if any(p not in kept for p in parents_of[sha])
    )
    return history


def _closure(
    objects: BaseObjectStore,
    commit: str,
    seen: set[str],
    budget: int | None,
    deadline: float | None,
) -> tuple[Commit, list[tuple[str, int, int]]]:
    """The commit and the objects of its tree not yet `seen`: (sha, type, size) each."""
    found: list[tuple[str, int, int]] = []
    spent = 0

    def charge(size: int) -> None:
        nonlocal spent
        spent += size
        if budget is not None and spent > budget:
            raise _OverBudget()

    raw = _read_typed(objects, commit, _COMMIT)
    charge(len(raw))
    parsed = _parse(Commit, raw)
    found.append((commit, _COMMIT, len(raw)))
    local: set[str] = set()
    pending = [parsed.tree.decode("ascii")]
    while pending:
        _check_deadline(deadline)
        tree_sha = pending.pop()
        if tree_sha in seen or tree_sha in local:
            continue
        raw = _read_typed(objects, tree_sha, _TREE)
        charge(len(raw))
        local.add(tree_sha)
        found.append((tree_sha, _TREE, len(raw)))
        for item in _parse(Tree, raw).iteritems():
            oid = item.sha.decode("ascii")
            if item.mode == _GITLINK or oid in seen or oid in local:
                continue
            if item.mode & 0o170000 == 0o040000:
                pending.append(oid)
                continue
            probe = probe_object(objects, oid, 0)
            if probe.type_num != _BLOB:
                raise SnapshotUnavailable()
            charge(probe.size)
            local.add(oid)
            found.append((oid, _BLOB, probe.size))
    return parsed, found


def _read_typed(objects: BaseObjectStore, sha: str, type_num: int) -> bytes:
    if probe_object(objects, sha, 0).type_num != type_num:
        raise SnapshotUnavailable()
    return read_raw(objects, sha)


def _parse[T: (Commit, Tree)](kind: type[T], raw: bytes) -> T:
    try:
        return kind.from_string(raw)
    except (ObjectFormatException, ValueError) as malformed:
        raise SnapshotUnavailable() from malformed


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise ExportTimedOut()


# --- writing ------------------------------------------------------------------------------


_TYPE_NAMES = {_COMMIT: b"commit", _TREE: b"tree", _BLOB: b"blob"}


def write_pack(
    objects: BaseObjectStore, history: History, out: IO[bytes], deadline: float | None
) -> tuple[str, bytes]:
    """Write the history's pack (whole objects, no deltas) to `out`; return its checksum
    (hex) and its version 2 index."""
    digest = hashlib.sha1(usedforsecurity=False)

    def emit(data: bytes) -> None:
        digest.update(data)
        out.write(data)

    emit(b"PACK" + struct.pack(">II", 2, len(history.objects)))
    offset = 12
    rows: list[tuple[bytes, int, int]] = []
    for sha, type_num in history.objects:
        _check_deadline(deadline)
        raw = read_raw(objects, sha)
        named = hashlib.sha1(
            _TYPE_NAMES[type_num] + b" %d\0" % len(raw) + raw, usedforsecurity=False
        )
        if named.hexdigest() != sha:
            raise SnapshotUnavailable()  # never ship an object under another name
        record = _pack_header(type_num, len(raw)) + zlib.compress(raw, _COMPRESSION)
        rows.append((bytes.fromhex(sha), offset, zlib.crc32(record)))
        emit(record)
        offset += len(record)
    checksum = digest.digest()
    out.write(checksum)
    return checksum.hex(), _pack_index(rows, checksum)


def _pack_header(type_num: int, size: int) -> bytes:
    byte = (type_num << 4) | (size & 0x0F)
    size >>= 4
    header = bytearray()
    while size:
        header.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    header.append(byte)
    return bytes(header)


def _pack_index(rows: list[tuple[bytes, int, int]], pack_checksum: bytes) -> bytes:
    rows = sorted(rows)
    fanout = [0] * 256
    for sha, _, _ in rows:
        fanout[sha[0]] += 1
    total = 0
    for first in range(256):
        total += fanout[first]
        fanout[first] = total
    small: list[int] = []
    large: list[int] = []
    for _, offset, _ in rows:
        if offset < 0x80000000:
            small.append(offset)
        else:
            small.append(0x80000000 | len(large))
            large.append(offset)
    body = b"".join(
        [
            b"\377tOc" + struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            *(sha for sha, _, _ in rows),
            *(struct.pack(">I", crc) for _, _, crc in rows),
            *(struct.pack(">I", offset) for offset in small),
            *(struct.pack(">Q", offset) for offset in large),
            pack_checksum,
        ]
    )
    return body + hashlib.sha1(body, usedforsecurity=False).digest()


def write_index(entries: Iterator[tuple[str, IndexEntry]], size_of: Callable[[str], int]) -> bytes:
    """A version 2 index of the tree: zeroed stat data, true modes and sizes."""
    rows: list[bytes] = []
    for path, entry in sorted(
        ((path.encode("utf-8"), entry) for path, entry in entries if entry.kind != "dir"),
        key=lambda row: row[0],
    ):
        if entry.kind == "submodule":
            mode, size = _GITLINK, 0
        elif entry.kind == "symlink":
            mode, size = 0o120000, size_of(entry.sha)
        else:
            mode, size = (0o100755 if entry.executable else 0o100644), size_of(entry.sha)
        fixed = struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, size & 0xFFFFFFFF)
        flags = struct.pack(">H", min(len(path), 0xFFF))
        record = fixed + bytes.fromhex(entry.sha) + flags + path
        rows.append(record + b"\0" * (8 - len(record) % 8))
    body = b"DIRC" + struct.pack(">II", 2, len(rows)) + b"".join(rows)
    return body + hashlib.sha1(body, usedforsecurity=False).digest()


def git_files(
    objects: BaseObjectStore,
    commit: str,
    entries: Iterator[tuple[str, IndexEntry]],
    size_of: Callable[[str], int],
    limits: ExportLimits,
    deadline: float | None,
) -> Iterator[tuple[str, IO[bytes] | bytes | None]]:
    """The `.git` directory's entries, relative to it, parents first: bytes for a small
    file, a spooled file positioned at 0 for the pack, None for a directory."""
    history = plan_history(objects, commit, limits, deadline)
    index = write_index(entries, size_of)
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as pack:
        checksum, pack_index = write_pack(objects, history, pack, deadline)
        pack.seek(0)
        yield "HEAD", commit.encode("ascii") + b"\n"
        yield "config", CONFIG
        yield "description", b"Forkhorse full-check checkout (read-only history).\n"
        yield "index", index
        if history.shallow:
            yield "shallow", "".join(f"{sha}\n" for sha in history.shallow).encode("ascii")
        for directory in DIRECTORIES:
            yield directory, None
        yield f"objects/pack/pack-{checksum}.idx", pack_index
        yield f"objects/pack/pack-{checksum}.pack", pack
