"""Bounded receive-pack: what a push may make Forkhorse spend, and what it may reference.

A pushed pack goes through three steps before the store sees it (`PushSession.receive`):

1. **Scan while it streams.** Each object header and each delta header is read as the pack
   arrives, and every object is inflated in 64 KiB steps (zlib's `max_length`) only to be
   counted: the object count, each object's inflated size, the inflated bytes of the whole
   push and the depth of OFS_DELTA chains are refused the moment a limit is passed, before
   anything is resolved. An object that inflates past the size its header declares is
   refused too. Memory: one step's output, whatever the pack claims.
2. **Resolve.** Deltas are applied against bases in the pack (REF_DELTA chains are measured
   here) and, for a thin pack, against external bases the pusher may read, and no others.
   Every commit, tree and tag is parsed and checked with dulwich's fsck rules; a tree has
   at most `tree_entries` entries, counted before it is parsed. Memory: the objects along
   one delta chain, each within `object_bytes`, all within `push_inflated_bytes`.
3. **Connectivity.** Every object the pack references (commit trees and parents, tree
   entries other than submodules, tag targets, thin delta bases) and every ref target must
   be in the pack or readable by the pusher: reachable from canonical's refs or from the
   refs of the repository pushed to (`Readable`). An object that is not reachable is
   refused in the same words, and after the same walk, whether or not the shared store
   holds it, so a refusal does not tell one agent what another pushed.

Only then is the pack, completed with its external bases, charged to the fork's storage
quota (`quota.py`; its ref quota is checked with the commands) and added to the store.
A refusal raises `PushRefused` (an OSError, which dulwich reports to the client as
`unpack <reason>`), and the spool file is removed on every path.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import time
import unicodedata
import zlib
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from dulwich.errors import ApplyDeltaError, ObjectFormatException
from dulwich.objects import Commit, ObjectID, RawObjectID, ShaFile, Tag, parse_tree
from dulwich.pack import apply_delta, extend_pack
from dulwich.refs import Ref, check_ref_format

from forkhorse.adapters.git.probe import MAX_VARINT_BYTES, delta_varint, probe_object
from forkhorse.adapters.git.quota import ForkQuota, QuotaExceeded
from forkhorse.domain.limits import GIT, MIB, GitLimits
from forkhorse.domain.snapshot import SnapshotUnavailable

if TYPE_CHECKING:
    from dulwich.object_store import BaseObjectStore, PackBasedObjectStore

ZERO = b"0" * 40
_COMMIT, _TREE, _BLOB, _TAG = 1, 2, 3, 4
_OFS_DELTA, _REF_DELTA = 6, 7
_TYPE_NAMES = {_COMMIT: b"commit", _TREE: b"tree", _BLOB: b"blob", _TAG: b"tag"}
_SHA_BYTES = 20
_STEP = 64 * 1024  # wire reads and inflation steps
_DELTA_HEAD = 20  # two size varints
_WRITABLE = (b"refs/heads/", b"refs/tags/")
_MAX_REF_BYTES = 1000  # DynamoDB sort key: "REF#" + name stays under 1024 bytes
_MAX_REF_COMPONENT_BYTES = 255  # one file name on disk
_RETAINED_TREE_BYTES = 32 * MIB  # pushed trees kept for the path-guided connectivity walk
_EDGES = 16  # readable commits the pushed trees are compared with, path by path
_HINT_STEPS = 1_000  # history a parent named by the pack is looked for, before the full walk
_TREE_CACHE = 256
_ENTRIES_PER_READ = 10  # a connectivity walk looks at most 10 tree entries per object read
_TAG_CHAIN = 16
_SHOWN_MISSING = 3
STALE_SPOOL_SECONDS = 3600  # a temporary pack this old belongs to no running push


class PushRefused(OSError):
    """A push refused for a reason the git client prints (`unpack <reason>` or `ng`)."""


# --- ref names and commands ---------------------------------------------------------------
def shown(name: bytes) -> str:
    """A ref name as a message may quote it: escaped, on one line, bounded."""
    text = repr(bytes(name))[2:-1]
    return text if len(text) <= 120 else text[:117] + "..."


def ref_name_problem(name: bytes) -> str | None:
    """Why a pushed ref name is refused (git's check-ref-format, UTF-8, no control or
    invisible characters, only branches and tags), or None."""
    if len(name) > _MAX_REF_BYTES:
        return f"ref name longer than {_MAX_REF_BYTES} bytes"
    if not name.startswith(_WRITABLE) or name in _WRITABLE:
        return f"{shown(name)}: only refs/heads/* and refs/tags/* can be pushed"
    if not check_ref_format(Ref(name)):
        return f"{shown(name)}: not a valid git ref name (git check-ref-format)"
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return f"{shown(name)}: a ref name must be UTF-8"
    if any(unicodedata.category(char)[0] in "CZ" for char in text):
        return f"{shown(name)}: a ref name cannot hold control, invisible or space characters"
    if any(len(part) > _MAX_REF_COMPONENT_BYTES for part in name.split(b"/")):
        return f"{shown(name)}: a ref name component is longer than 255 bytes"
    return None


Command = tuple[bytes, bytes, bytes]  # (old, new, ref) as dulwich's receive-pack reads them


def check_commands(commands: Sequence[Command], limits: GitLimits = GIT) -> None:
    """Refuse the whole push before its pack is read: too many updates or a bad ref name."""
    if len(commands) > limits.ref_updates:
        raise PushRefused(
            f"this push updates {len(commands)} refs; the limit is {limits.ref_updates} "
            "per push (push fewer refs at a time)"
        )
    seen: set[bytes] = set()
    for old, new, name in commands:
        problem = ref_name_problem(name)
        if problem is not None:
            raise PushRefused(f"refused ref name {problem}")
        if name in seen:
            raise PushRefused(f"{shown(name)} is updated twice in one push")
        seen.add(name)
        if not (_is_hex(old) and _is_hex(new)):
            raise PushRefused(f"{shown(name)}: object names must be 40 lowercase hex digits")


def _is_hex(value: bytes) -> bool:
    return len(value) == 40 and all(c in b"0123456789abcdef" for c in value)


# --- step 1: scan the pack as it streams ---------------------------------------------------
class _Wire:
    """The pushed pack as it arrives: bytes are consumed in order, hashed and spooled."""

    def __init__(self, read: Callable[[int], bytes], sink: BinaryIO, limit: int | None) -> None:
        self._read = read
        self._sink = sink
        self._limit = limit
        self._buffer = b""
        self._at = 0
        self._received = 0
        self.digest = hashlib.sha1()  # noqa: S324 - git's pack checksum
        self.position = 0

    def _fill(self) -> None:
        data = self._read(_STEP)
        if not data:
            raise PushRefused("the pack ends before its last object (truncated push)")
        self._received += len(data)
        if self._limit is not None and self._received > self._limit:
            raise PushRefused(
                f"the pushed pack is larger than {self._limit} bytes, the server's limit; "
                "push fewer commits at a time"
            )
        self._buffer = self._buffer[self._at :] + data
        self._at = 0

    def peek(self) -> memoryview:
        if self._at >= len(self._buffer):
            self._fill()
        return memoryview(self._buffer)[self._at :]

    def consume(self, count: int, *, hashed: bool = True) -> bytes:
        while len(self._buffer) - self._at < count:
            self._fill()
        data = self._buffer[self._at : self._at + count]
        self._at += count
        if hashed:
            self.digest.update(data)
        self._sink.write(data)
        self.position += count
        return data

    def byte(self) -> int:
        return self.consume(1)[0]


@dataclass(slots=True)
class _Entry:
    offset: int
    kind: int  # 1-4 a whole object, 6 OFS_DELTA, 7 REF_DELTA
    data_start: int
    data_end: int
    stream_size: int  # what its zlib stream inflates to
    size: int  # the object's size: a whole object's, or a delta's result
    base: int | bytes | None  # OFS_DELTA: the base's entry index; REF_DELTA: its raw SHA
    depth: int  # deltas below it that the scan can see (OFS chains); 0 for a whole object


@dataclass
class _Budget:
    limits: GitLimits
    inflated: int = 0

    def charge(self, size: int, what: str) -> None:
        self.inflated += size
        if self.inflated > self.limits.push_inflated_bytes:
            raise PushRefused(
                f"the push inflates to more than {self.limits.push_inflated_bytes} bytes "
                f"(at {what}), the server's limit per push; push fewer or smaller objects"
            )


def _scan(wire: _Wire, limits: GitLimits) -> list[_Entry]:
    """Read the whole pack from the wire, refusing it at the first limit passed."""
    header = wire.consume(12)
    if header[:4] != b"PACK" or int.from_bytes(header[4:8]) not in (2, 3):
        raise PushRefused("the pushed data is not a git pack (bad header)")
    count = int.from_bytes(header[8:12])
    if count > limits.push_objects:
        raise PushRefused(
            f"the pack holds {count} objects; the limit is {limits.push_objects} objects "
            "per push (push fewer commits at a time)"
        )
    budget = _Budget(limits)
    entries: list[_Entry] = []
    index_at: dict[int, int] = {}
    for number in range(count):
        entry = _scan_entry(wire, limits, budget, entries, index_at, number)
        index_at[entry.offset] = len(entries)
        entries.append(entry)
    expected = wire.digest.digest()
    if wire.consume(_SHA_BYTES, hashed=False) != expected:
        raise PushRefused("the pack's checksum does not match its content (corrupt push)")
    return entries


def _scan_entry(
    wire: _Wire,
    limits: GitLimits,
    budget: _Budget,
    entries: list[_Entry],
    index_at: dict[int, int],
    number: int,
) -> _Entry:
    offset = wire.position
    first = wire.byte()
    kind = (first >> 4) & 0x07
    stream_size = first & 0x0F
    shift = 4
    byte = first
    while byte & 0x80:
        if shift > 7 * MAX_VARINT_BYTES:
            raise PushRefused(f"object {number} has a malformed size in its header")
        byte = wire.byte()
        stream_size |= (byte & 0x7F) << shift
        shift += 7
    what = f"object {number} of the pack"
    base: int | bytes | None = None
    depth = 0
    if kind == _OFS_DELTA:
        base = _ofs_base(wire, offset, index_at, number)
        depth = entries[base].depth + 1
    elif kind == _REF_DELTA:
        base = wire.consume(_SHA_BYTES)
        depth = 1
    elif kind not in _TYPE_NAMES:
        raise PushRefused(f"object {number} has an unknown type {kind}")
    if depth > limits.delta_depth:
        raise PushRefused(
            f"{what} is a delta {depth} deep; the limit is {limits.delta_depth} "
            "(repack with a smaller --depth)"
        )
    delta = kind in (_OFS_DELTA, _REF_DELTA)
    # a delta's instructions may be a little larger than the object they build
    stream_limit = limits.object_bytes + (limits.object_bytes >> 6 if delta else 0)
    if stream_size > stream_limit:
        raise _too_large(what, stream_size, limits)
    budget.charge(stream_size, what)
    data_start = wire.position
    head = _inflate_stream(wire, stream_size, _DELTA_HEAD if delta else 0, what)
    size = stream_size
    if delta:
        base_size, position = _varint(head, 0, what)
        size, _ = _varint(head, position, what)
        if size > limits.object_bytes:
            raise _too_large(what, size, limits)
        if isinstance(base, int) and entries[base].size != base_size:
            raise PushRefused(f"{what} is a delta whose base size does not match its base")
        budget.charge(size, what)
    return _Entry(offset, kind, data_start, wire.position, stream_size, size, base, depth)


def _too_large(what: str, size: int, limits: GitLimits) -> PushRefused:
    return PushRefused(
        f"{what} inflates to {size} bytes; the limit is {limits.object_bytes} bytes per object"
    )


def _ofs_base(wire: _Wire, offset: int, index_at: dict[int, int], number: int) -> int:
    byte = wire.byte()
    distance = byte & 0x7F
    for _ in range(MAX_VARINT_BYTES):
        if not byte & 0x80:
            break
        byte = wire.byte()
        distance = ((distance + 1) << 7) | (byte & 0x7F)
    else:
        raise PushRefused(f"object {number} has a malformed delta base offset")
    found = index_at.get(offset - distance)
    if distance <= 0 or found is None:
        raise PushRefused(f"object {number} is a delta whose base is not an earlier object")
    return found


def _inflate_stream(wire: _Wire, declared: int, keep: int, what: str) -> bytes:
    """Inflate one zlib stream from the wire in bounded steps; keep its first `keep` bytes."""
    inflater = zlib.decompressobj()
    produced = 0
    head = bytearray()
    while not inflater.eof:
        chunk = wire.peek()
        data: bytes | memoryview = chunk
        while True:
            try:
                out = inflater.decompress(data, _STEP)
            except zlib.error as corrupt:
                raise PushRefused(f"{what} is not valid zlib data") from corrupt
            produced += len(out)
            if produced > declared:
                raise PushRefused(f"{what} inflates past the {declared} bytes its header declares")
            if len(head) < keep:
                head += out[: keep - len(head)]
            data = inflater.unconsumed_tail
            if inflater.eof or (not data and len(out) < _STEP):
                break
        used = len(chunk) - len(inflater.unused_data) if inflater.eof else len(chunk)
        del chunk
        wire.consume(used)
    if produced != declared:
        raise PushRefused(f"{what} inflates to {produced} bytes, not the {declared} declared")
    return bytes(head)


def _varint(data: bytes, position: int, what: str) -> tuple[int, int]:
    parsed = delta_varint(data, position)
    if parsed is None:
        raise PushRefused(f"{what} is a delta with a malformed header")
    return parsed


# --- step 2: resolve, parse and check every object -----------------------------------------
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


# --- step 3: what the pusher may read ---------------------------------------------------------
class _Exhausted(Exception):
    """The walk read as many stored objects as one check may."""


class Readable:
    """Objects reachable from the refs a pusher may read, proven by bounded walks.

    Each `find` reads at most `budget` stored objects (`push_objects`) and looks at most
    `_ENTRIES_PER_READ` times as many tree entries, so wide trees are bounded too. It looks
    where a git client's thin pack points first (the pushed trees against their readable
    parent commits, path by path), then walks the parents' whole trees, then the rest of
    the readable history, newest first, with every tree walked once. It stops as soon as
    everything wanted is found; an object it cannot find costs the whole walk (or the
    budget), found in the store or not.
    """

    def __init__(self, objects: BaseObjectStore, tips: Iterable[bytes], budget: int) -> None:
        self._objects = objects
        self._tips = list(dict.fromkeys(tips))
        self._limit = budget
        self._commits: dict[bytes, tuple[bytes, tuple[bytes, ...]]] = {}
        self._order: list[bytes] = []
        self._frontier: list[tuple[int, int, bytes]] = []
        self._tagged: set[bytes] = set()  # tag objects and non-commit objects the tips name
        self._tip_trees: list[bytes] = []
        self._started = False
        self._trees: OrderedDict[bytes, _Listing | None] = OrderedDict()
        self._spent = 0
        self._spent_entries = 0
        self._remaining: set[bytes] = set()
        self._found: set[bytes] = set()

    def find(
        self, wanted: set[bytes], pack: _Received | None = None, hints: Iterable[bytes] = ()
    ) -> set[bytes]:
        """The readable subset of `wanted` (hex SHAs)."""
        self._remaining = set(wanted)
        self._found = set()
        self._spent = 0
        self._spent_entries = 0
        with suppress(_Exhausted):  # a spent walk budget ends the walk; unfound stays unread
            self._start()
            for sha in list(self._remaining):
                if sha in self._commits or sha in self._tagged:
                    self._hit(sha)
            if self._remaining:
                self._search(pack, hints)
        return self._found

    # Walk phases ------------------------------------------------------------------------
    def _search(self, pack: _Received | None, hints: Iterable[bytes]) -> None:
        edges: list[bytes] = []
        for hint in dict.fromkeys(hints):
            if len(edges) < _EDGES and self._reach_commit(hint, _HINT_STEPS):
                edges.append(hint)
        edges += [tip for tip in self._tips if tip in self._commits]
        edges = list(dict.fromkeys(edges))[:_EDGES]
        if pack is not None:
            pairs: set[tuple[bytes, bytes]] = set()
            for tree, _ in pack.commits.values():
                for edge in edges:
                    if not self._remaining:
                        return
                    self._compare(tree, self._commits[edge][0], pack, pairs)
        visited: set[bytes] = set()
        for root in [*self._tip_trees, *(self._commits[edge][0] for edge in edges)]:
            self._walk(root, visited)
        walked = set(edges)
        position = 0
        while self._remaining:
            progressed = self._expand()
            while position < len(self._order) and self._order[position] in walked:
                position += 1
            if position < len(self._order):
                commit = self._order[position]
                walked.add(commit)
                self._walk(self._commits[commit][0], visited)
                progressed = True
            if not progressed:
                return

    def _compare(
        self, new: bytes, old: bytes, pack: _Received, pairs: set[tuple[bytes, bytes]]
    ) -> None:
        """Walk a pushed tree and a readable one together, path by path: every entry of the
        readable tree is readable, and same-named subtrees are compared in turn."""
        todo = [(new, old)]
        while todo and self._remaining:
            new, old = todo.pop()
            if (new, old) in pairs:
                continue
            pairs.add((new, old))
            self._hit(old)
            listing = self._tree(old)
            if listing is None:
                continue
            self._hit_all(listing.shas)
            raw = pack.trees.get(new)
            if raw is None:
                continue
            for name, mode, sha in parse_tree(raw, _SHA_BYTES):
                if mode != _DIR or sha not in pack.trees:
                    continue
                previous = listing.dirs.get(name)
                if previous is not None and previous != sha:
                    todo.append((sha, previous))

    def _walk(self, root: bytes, visited: set[bytes]) -> None:
        todo = [root]
        while todo and self._remaining:
            tree = todo.pop()
            if tree in visited:
                continue
            visited.add(tree)
            self._hit(tree)
            listing = self._tree(tree)
            if listing is not None:
                self._hit_all(listing.shas)
                todo.extend(sha for sha in listing.dirs.values() if sha not in visited)

    # History ----------------------------------------------------------------------------
    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        for tip in self._tips:
            self._peel(tip)

    def _peel(self, sha: bytes) -> None:
        for _ in range(_TAG_CHAIN):
            try:
                type_num = probe_object(self._objects, sha.decode("ascii"), 0).type_num
            except SnapshotUnavailable:
                return
            if type_num == _COMMIT:
                self._discover(sha)
                return
            self._tagged.add(sha)
            if type_num == _TREE:
                self._tip_trees.append(sha)
            if type_num != _TAG:
                return
            read = self._read(sha)
            if read is None or read[0] != _TAG:
                return
            try:
                sha = cast(Tag, Tag.from_raw_string(_TAG, read[1])).object[1]
            except (ObjectFormatException, ValueError):
                return

    def _reach_commit(self, sha: bytes, steps: int) -> bool:
        while sha not in self._commits and steps > 0 and self._expand():
            steps -= 1
        return sha in self._commits

    def _expand(self) -> bool:
        """Discover the parents of the newest commit not yet expanded."""
        if not self._frontier:
            return False
        _, _, sha = heapq.heappop(self._frontier)
        for parent in self._commits[sha][1]:
            if parent not in self._commits:
                self._discover(parent)
        return True

    def _discover(self, sha: bytes) -> None:
        read = self._read(sha)
        if read is None or read[0] != _COMMIT:
            return
        tree, parents, when = _commit_fields(read[1])
        if tree is None:
            return
        self._commits[sha] = (tree, parents)
        self._order.append(sha)
        heapq.heappush(self._frontier, (-when, len(self._order), sha))
        self._hit(sha)

    # Reads ------------------------------------------------------------------------------
    def _hit(self, sha: bytes) -> None:
        if sha in self._remaining:
            self._remaining.discard(sha)
            self._found.add(sha)

    def _hit_all(self, shas: frozenset[bytes]) -> None:
        found = self._remaining.intersection(shas)
        if found:
            self._remaining -= found
            self._found |= found

    def _read(self, sha: bytes) -> tuple[int, bytes] | None:
        self._spent += 1
        if self._spent > self._limit or self._spent_entries > self._limit * _ENTRIES_PER_READ:
            raise _Exhausted()
        try:
            type_num, data = self._objects.get_raw(ObjectID(sha))
        except (KeyError, ValueError, zlib.error, ApplyDeltaError):
            return None
        return type_num, bytes(data)

    def _tree(self, sha: bytes) -> _Listing | None:
        if sha in self._trees:
            self._trees.move_to_end(sha)
            return self._trees[sha]
        read = self._read(sha)
        listing: _Listing | None = None
        if read is not None and read[0] == _TREE:
            try:
                entries = list(parse_tree(read[1], _SHA_BYTES))
            except (ObjectFormatException, ValueError):
                entries = None
            if entries is not None:
                self._spent_entries += len(entries)
                listing = _Listing(
                    frozenset(sha for _, mode, sha in entries if mode != _GITLINK),
                    {name: sha for name, mode, sha in entries if mode == _DIR},
                )
        self._trees[sha] = listing
        while len(self._trees) > _TREE_CACHE:
            self._trees.popitem(last=False)
        return listing


@dataclass(frozen=True, slots=True)
class _Listing:
    """A stored tree as the walks need it: what it names, and its subtrees by name."""

    shas: frozenset[bytes]
    dirs: dict[bytes, bytes]


def _commit_fields(raw: bytes) -> tuple[bytes | None, tuple[bytes, ...], int]:
    """A stored commit's tree, parents and committer time, from its header alone."""
    tree: bytes | None = None
    parents: list[bytes] = []
    when = 0
    for line in raw.split(b"\n\n", 1)[0].split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = value
        elif key == b"parent":
            parents.append(value)
        elif key == b"committer":
            with suppress(ValueError, IndexError):
                when = int(value.rsplit(b" ", 2)[-2])
    return tree, tuple(parents), when


# --- the push --------------------------------------------------------------------------------
class PushSession:
    """One receive-pack request: its commands, its pack, and what it may reference.

    `check_commands` runs before the pack is read (dulwich's pre-receive), `receive` takes
    the pack (dulwich's `add_thin_pack`), `target_problem` judges each ref update (dulwich's
    update hook). `readable_tips` names the refs the pusher may read: canonical's and those
    of the repository pushed to. `quota`, for a push to a fork, is that fork's quota
    (`quota.py`): its refs are checked with the commands, and its bytes charged once the
    pack is complete, before it is stored.
    """

    def __init__(
        self,
        readable_tips: Callable[[], Iterable[bytes]],
        *,
        limits: GitLimits = GIT,
        quota: ForkQuota | None = None,
    ) -> None:
        self._readable_tips = readable_tips
        self._limits = limits
        self._quota = quota
        self.commands: list[Command] = []
        self._received: _Received | None = None
        self._readable: Readable | None = None
        self._readable_targets: set[bytes] = set()
        self._checked_targets: set[bytes] = set()

    @property
    def limits(self) -> GitLimits:
        return self._limits

    def check_commands(self, commands: Sequence[Command]) -> None:
        check_commands(commands, self._limits)
        if self._quota is not None:
            try:
                self._quota.check_commands(commands)
            except QuotaExceeded as exceeded:
                raise PushRefused(str(exceeded)) from exceeded
        self.commands = list(commands)

    def receive(
        self,
        objects: PackBasedObjectStore,
        read_all: Callable[[int], bytes],
        read_some: Callable[[int], bytes] | None,
        max_input_size: int | None,
    ) -> Any:
        """Scan, resolve and check a pushed pack, then add it to `objects` and return what
        the store's `add_pack` commit returns; or refuse it (PushRefused), leaving nothing."""
        spool, commit, abort = objects.add_pack()
        try:
            wire = _Wire(read_some or read_all, spool, max_input_size or None)
            entries = _scan(wire, self._limits)
            spool.flush()
            received = _Received(self._limits)
            resolver = _Resolver(spool, entries, received, self._limits)
            resolver.resolve_in_pack()
            readable = self._readable_view(objects)
            hints = self._hints(received)
            pending = {_hex(base) for base in resolver.pending_bases()}
            usable = readable.find(pending, received, hints) if pending else set()
            for base in sorted(resolver.pending_bases()):
                if _hex(base) in usable:
                    type_num, data = objects.get_raw(ObjectID(_hex(base)))
                    resolver.resolve_external(base, type_num, bytes(data))
            unresolved = resolver.pending_bases()
            if unresolved:
                raise PushRefused(_unreachable("delta base", [b.hex() for b in unresolved]))
            self._check_connected(readable, received, self._hints(received))
            self._received = received
            if not entries:
                _quietly(abort)
                return None
            outside = {
                RawObjectID(base) for base in received.ext_bases if _hex(base) not in received.types
            }
            extend_pack(
                spool, outside, get_raw=objects.get_raw, object_format=objects.object_format
            )
            charged = self._charge(spool.seek(0, os.SEEK_END))  # commit reads from the end
            stored = commit()
            if charged is not None and self._quota is not None:
                pack_data = getattr(stored, "data", None)
                if pack_data is not None:
                    self._quota.stored(charged, Path(pack_data.filename).stem)
            return stored
        except BaseException:
            _quietly(abort)
            raise

    def target_problem(self, objects: BaseObjectStore, ref: bytes, new: bytes) -> str | None:
        """Why `ref` may not be set to `new`, or None: the target must be pushed or readable,
        a branch must name a commit and a tag a commit or a tag."""
        received = self._received
        type_num = received.types.get(new) if received is not None else None
        if type_num is None:
            if new not in self._checked_targets:
                readable = self._readable_view(objects)
                self._readable_targets |= readable.find({new})
                self._checked_targets.add(new)
            if new not in self._readable_targets:
                return _unreachable("ref target", [new.decode("ascii")])
            try:
                type_num = probe_object(objects, new.decode("ascii"), 0).type_num
            except SnapshotUnavailable:
                return _unreachable("ref target", [new.decode("ascii")])
        if ref.startswith(b"refs/heads/") and type_num != _COMMIT:
            kind = _TYPE_NAMES.get(type_num, b"object").decode()
            return f"a branch must point at a commit, and {new.decode()} is a {kind}"
        if type_num not in (_COMMIT, _TAG):
            kind = _TYPE_NAMES.get(type_num, b"object").decode()
            return f"a tag ref must point at a commit or a tag, and {new.decode()} is a {kind}"
        return None

    # Internals ---------------------------------------------------------------------------
    def _charge(self, size: int) -> str | None:
        """Charge the complete pack to the fork's quota, or refuse the push."""
        if self._quota is None:
            return None
        try:
            return self._quota.charge(size)
        except QuotaExceeded as exceeded:
            raise PushRefused(str(exceeded)) from exceeded

    def _readable_view(self, objects: BaseObjectStore) -> Readable:
        if self._readable is None:
            self._readable = Readable(objects, self._readable_tips(), self._limits.push_objects)
        return self._readable

    def _hints(self, received: _Received) -> list[bytes]:
        parents = [
            parent
            for _, commit_parents in received.commits.values()
            for parent in commit_parents
            if parent not in received.types
        ]
        olds = [old for old, _, _ in self.commands if old != ZERO]
        return list(dict.fromkeys([*parents, *olds]))

    def _check_connected(self, readable: Readable, received: _Received, hints: list[bytes]) -> None:
        targets = {new for _, new, _ in self.commands if new != ZERO}
        wanted = (received.referenced | targets) - received.types.keys()
        found = readable.find(wanted, received, hints) if wanted else set()
        self._readable_targets = found & targets
        self._checked_targets = set(targets)
        missing = sorted((received.referenced - received.types.keys()) - found)
        if missing:
            raise PushRefused(_unreachable("object", [sha.decode("ascii") for sha in missing]))


def _unreachable(what: str, shas: Sequence[str]) -> str:
    listed = ", ".join(sorted(shas)[:_SHOWN_MISSING])
    more = f" and {len(shas) - _SHOWN_MISSING} more" if len(shas) > _SHOWN_MISSING else ""
    return (
        f"{what} {listed}{more} is neither in the pushed pack nor reachable from canonical "
        "or this repository's refs; push the objects themselves (the server checks "
        "connectivity, like git's receive.fsckObjects)"
    )


def _hex(raw: bytes) -> bytes:
    return raw.hex().encode("ascii")


def _quietly(action: Callable[[], object]) -> None:
    with suppress(OSError, ValueError):
        action()


# --- disk hygiene ----------------------------------------------------------------------------
def sweep_stale_spools(objects_dir: Path, grace_seconds: float = STALE_SPOOL_SECONDS) -> int:
    """Remove temporary packs a crashed push left behind (`tmp_pack_*` in the objects
    directory, a `.pack` without its `.idx` in `pack/`), only those older than the grace
    period so a push in progress keeps its own. Returns how many were removed."""
    cutoff = time.time() - grace_seconds
    removed = 0
    candidates = list(objects_dir.glob("tmp_pack_*"))
    pack_dir = objects_dir / "pack"
    if pack_dir.is_dir():
        names = {path.name for path in pack_dir.iterdir()}
        candidates += [
            pack_dir / name
            for name in names
            if name.endswith(".pack") and name[: -len(".pack")] + ".idx" not in names
        ]
    for path in candidates:
        with suppress(FileNotFoundError):
            if path.stat().st_mtime < cutoff:
                os.remove(path)
                removed += 1
    return removed


class SessionPackReceiver:
    """Mixed into a store's object store class: a pushed pack goes through the request's
    `PushSession`, never straight into the store; without a session a push is refused."""

    push_session: PushSession | None = None

    def add_thin_pack(
        self,
        read_all: Callable[[int], bytes],
        read_some: Callable[[int], bytes] | None,
        progress: Callable[..., None] | None = None,
        *,
        max_input_size: int | None = None,
    ) -> Any:
        session = self.push_session
        if session is None:
            raise PushRefused("this object store accepts pushes only through a push session")
        return session.receive(
            cast("PackBasedObjectStore", self), read_all, read_some, max_input_size
        )
