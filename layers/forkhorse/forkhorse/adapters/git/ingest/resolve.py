"""Step 2: resolve the pack's deltas, then parse and check every object as git's fsck does."""

from __future__ import annotations

import hashlib
import zlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO, cast

from dulwich.errors import ApplyDeltaError, ObjectFormatException
from dulwich.objects import Commit, ShaFile, Tag, parse_tree
from dulwich.pack import apply_delta

from forkhorse.adapters.git.ingest import (
    _BLOB,
    _OFS_DELTA,
    _REF_DELTA,
    _SHA_BYTES,
    _STEP,
    _TREE,
    _TYPE_NAMES,
    PushRefused,
)
from forkhorse.adapters.git.ingest.pack_scan import _Entry
from forkhorse.domain.limits import MIB, GitLimits

_RETAINED_TREE_BYTES = 32 * MIB  # pushed trees kept for the path-guided connectivity walk


@dataclass
class _Received:
    """What a resolved pack holds and names, kept small: no blob content is retained."""

    limits: GitLimits
    types: dict[bytes, int] = field(default_factory=dict)  # hex SHA -> type
    commits: dict[bytes, tuple[bytes, tuple[bytes, ...]]] = field(default_factory=dict)
    trees: dict[bytes, bytes] = field(default_factory=dict)  # retained raw trees, bounded
    referenced: set[bytes] = field(default_factory=set)
    ext_bases: set[bytes] = field(default_factory=set)  # raw SHAs a thin pack deltas against
    _retained: int = 0

    def add(self, sha: bytes, type_num: int, data: bytes) -> None:
        if sha in self.types:
            raise PushRefused(f"the pack holds object {sha.decode()} twice")
        self.types[sha] = type_num
        what = f"{_TYPE_NAMES[type_num].decode()} {sha.decode()}"
        if type_num == _BLOB:
            return
        if type_num == _TREE:
            self._refer(what, _checked_tree(data, self.limits, what))
            if self._retained + len(data) <= _RETAINED_TREE_BYTES:
                self.trees[sha] = data
                self._retained += len(data)
            return
        parsed = _parsed(type_num, data, what)
        if isinstance(parsed, Commit):
            self.commits[sha] = (parsed.tree, tuple(parsed.parents))
            self._refer(what, [parsed.tree, *parsed.parents])
        elif isinstance(parsed, Tag):
            self._refer(what, [parsed.object[1]])

    def _refer(self, what: str, shas: Iterable[bytes]) -> None:
        self.referenced.update(shas)
        ceiling = 2 * self.limits.push_objects
        if len(self.referenced) > ceiling:
            raise PushRefused(
                f"the pack references more than {ceiling} distinct objects (at {what}), "
                "twice the server's object limit per push"
            )


_DIR, _GITLINK = 0o040000, 0o160000
_TREE_MODES = frozenset({0o100644, 0o100755, 0o100664, 0o120000, _DIR, _GITLINK})
_BAD_NAMES = frozenset({b"", b".", b"..", b".git"})


def _checked_tree(data: bytes, limits: GitLimits, what: str) -> list[bytes]:
    """A pushed tree, checked as git's fsck does (entry count first, then format, modes,
    names, order and duplicates); returns the SHAs it references (submodules aside)."""
    if data.count(b"\0") > limits.tree_entries:  # every entry has one NUL, SHAs may add some
        _count_tree_entries(data, limits, what)
    try:
        entries = parse_tree(data, _SHA_BYTES, strict=True)
    except (ObjectFormatException, ValueError) as bad:
        raise PushRefused(f"{what} is malformed ({_one_line(bad)})") from bad
    # Whole-list checks, so a tree of many entries costs C loops, not Python ones.
    names = [name for name, _, _ in entries]
    if not {mode for _, mode, _ in entries} <= _TREE_MODES:
        raise PushRefused(f"{what} is malformed (an entry has an invalid mode)")
    if len(set(names)) != len(names):
        raise PushRefused(f"{what} is malformed (duplicate entries)")
    keys = [name + b"/" if mode == _DIR else name for name, mode, _ in entries]
    if keys != sorted(keys):
        raise PushRefused(f"{what} is malformed (entries not sorted)")
    joined = b"\0" + b"\0".join(names).lower() + b"\0"
    if names and (b"/" in joined or any(b"\0" + bad + b"\0" in joined for bad in _BAD_NAMES)):
        raise PushRefused(
            f"{what} is malformed (an entry is named '', '.', '..', '.git' or has '/')"
        )
    return [sha for _, mode, sha in entries if mode != _GITLINK]


def _count_tree_entries(data: bytes, limits: GitLimits, what: str) -> None:
    """Entries of a raw tree, counted up to the limit before anything is parsed."""
    position = 0
    entries = 0
    while position < len(data):
        end = data.find(b"\0", position)
        if end < 0:
            raise PushRefused(f"{what} is malformed")
        position = end + 1 + _SHA_BYTES
        entries += 1
        if entries > limits.tree_entries:
            raise PushRefused(
                f"{what} has more than {limits.tree_entries} entries, the limit per directory"
            )


def _parsed(type_num: int, data: bytes, what: str) -> ShaFile:
    try:
        parsed = ShaFile.from_raw_string(type_num, data)
        parsed.check()
    except (ObjectFormatException, ValueError, KeyError, IndexError, TypeError) as bad:
        raise PushRefused(f"{what} is malformed ({_one_line(bad)})") from bad
    return parsed


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:160] or type(error).__name__


def _object_id(type_num: int, data: bytes) -> bytes:
    digest = hashlib.sha1(_TYPE_NAMES[type_num] + b" %d\0" % len(data))  # noqa: S324
    digest.update(data)
    return digest.hexdigest().encode("ascii")


class _Resolver:
    """Applies the pack's deltas depth first, one chain at a time, reading from the spool."""

    def __init__(
        self, spool: BinaryIO, entries: list[_Entry], received: _Received, limits: GitLimits
    ) -> None:
        self._spool = spool
        self._entries = entries
        self._received = received
        self._limits = limits
        self._by_base: dict[int, list[int]] = defaultdict(list)
        self._by_ref: dict[bytes, list[int]] = defaultdict(list)
        self._roots: list[int] = []
        for index, entry in enumerate(entries):
            if entry.kind == _OFS_DELTA:
                self._by_base[cast(int, entry.base)].append(index)
            elif entry.kind == _REF_DELTA:
                self._by_ref[cast(bytes, entry.base)].append(index)
            else:
                self._roots.append(index)

    def resolve_in_pack(self) -> None:
        for index in self._roots:
            self._follow(index, None)

    def pending_bases(self) -> set[bytes]:
        """Raw SHAs that deltas still wait for: a thin pack's external bases."""
        return set(self._by_ref)

    def resolve_external(self, base: bytes, type_num: int, data: bytes) -> None:
        waiting = self._by_ref.pop(base, None)
        if not waiting:
            return  # resolved from the pack meanwhile
        self._received.ext_bases.add(base)
        for index in waiting:
            self._follow(index, (type_num, data, 0))

    def _follow(self, index: int, base: tuple[int, bytes, int] | None) -> None:
        todo: list[tuple[int, tuple[int, bytes, int] | None]] = [(index, base)]
        while todo:
            index, base = todo.pop()
            entry = self._entries[index]
            raw = self._inflate(entry)
            what = f"object {index} of the pack"
            if base is None:
                type_num, data, depth = entry.kind, raw, 0
            else:
                type_num, base_data, base_depth = base
                depth = base_depth + 1
                if depth > self._limits.delta_depth:
                    raise PushRefused(
                        f"{what} is a delta {depth} deep; the limit is "
                        f"{self._limits.delta_depth} (repack with a smaller --depth)"
                    )
                try:
                    data = b"".join(apply_delta(base_data, raw))
                except (ApplyDeltaError, ValueError, MemoryError) as bad:
                    raise PushRefused(f"{what} is a delta that does not apply") from bad
                if len(data) != entry.size or (type_num != _BLOB and not data):
                    raise PushRefused(f"{what} is a delta that does not apply")
            del raw
            sha = _object_id(type_num, data)
            self._received.add(sha, type_num, data)
            for child in self._by_base.pop(index, []):
                todo.append((child, (type_num, data, depth)))
            for child in self._by_ref.pop(bytes.fromhex(sha.decode()), []):
                todo.append((child, (type_num, data, depth)))

    def _inflate(self, entry: _Entry) -> bytes:
        self._spool.seek(entry.data_start)
        inflater = zlib.decompressobj()
        out = bytearray()
        remaining = entry.data_end - entry.data_start
        while remaining > 0 and not inflater.eof and len(out) <= entry.stream_size:
            chunk = self._spool.read(min(_STEP, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            out += inflater.decompress(chunk, entry.stream_size + 1 - len(out))
        if len(out) != entry.stream_size:
            raise PushRefused("the spooled pack changed while it was resolved")
        return bytes(out)
