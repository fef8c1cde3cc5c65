"""Step 3: what the pusher may read, proven by bounded walks of the readable history."""

from __future__ import annotations

import heapq
import zlib
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from dulwich.errors import ApplyDeltaError, ObjectFormatException
from dulwich.objects import ObjectID, Tag, parse_tree

from forkhorse.adapters.git.ingest import _COMMIT, _SHA_BYTES, _TAG, _TREE
from forkhorse.adapters.git.ingest.resolve import _DIR, _GITLINK, _Received
from forkhorse.adapters.git.probe import probe_object
from forkhorse.domain.snapshot import SnapshotUnavailable

if TYPE_CHECKING:
    from dulwich.object_store import BaseObjectStore

_EDGES = 16  # readable commits the pushed trees are compared with, path by path
_HINT_STEPS = 1_000  # history a parent named by the pack is looked for, before the full walk
_TREE_CACHE = 256
_ENTRIES_PER_READ = 10  # a connectivity walk looks at most 10 tree entries per object read
_TAG_CHAIN = 16


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
