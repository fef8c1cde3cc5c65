"""Partial clones: git's object filters, and wants of objects that are not ref tips.

`git clone --filter=<spec>` asks the server to leave objects out of the pack; the client
fetches what it misses later with `want <object id>` lines naming blobs or trees (a
"lazy fetch"). Served here, with git's own semantics:

- `blob:none`: no blobs; `blob:limit=<n>[kmg]`: no blob of `n` bytes or more (its size is
  read from the object's header, the blob is never inflated); `tree:<depth>`: no tree or
  blob whose depth from a commit's root tree is `depth` or more (`tree:0` sends commits
  and tags only). An object the request names in a `want` is always sent.
- Any other spec (`sparse:oid=`, `combine:`, ...) is ignored: the client gets a full pack,
  which git accepts, never a refusal.

A `want` that is not a ref tip the repository advertises must be reachable from the refs
the caller may read (canonical's and the requested repository's), found by a walk that
reads at most `GIT_WALKS.negotiation_commits` commits and `WANT_TREES` trees; a want it
does not reach is git's "not our ref". So a lazy fetch never reads another agent's fork.
"""

from __future__ import annotations

import stat
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, ObjectID, Tag, Tree

from forkhorse.adapters.git.probe import probe_object
from forkhorse.domain.limits import GIT_WALKS
from forkhorse.domain.snapshot import SnapshotUnavailable

WANT_TREES = 200_000  # trees one reachability check of unadvertised wants may read
_COMMIT, _TREE, _BLOB, _TAG = 1, 2, 3, 4
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_GITLINK = 0o160000

PackEntry = tuple[ObjectID, object]  # (object id, dulwich's pack hint or None)


@dataclass(frozen=True)
class ObjectFilter:
    """One supported filter: blobs of `blob_limit` bytes or more are left out (0: every
    blob), and trees and blobs at `tree_depth` or deeper (None: no depth limit)."""

    blob_limit: int | None = None
    tree_depth: int | None = None


def parse_filter(spec: bytes | None) -> ObjectFilter | None:
    """The filter a `filter <spec>` line asks for; None (a full pack) when unsupported."""
    if spec is None:
        return None
    text = spec.decode("ascii", "replace").strip()
    if text == "blob:none":
        return ObjectFilter(blob_limit=0)
    if text.startswith("blob:limit="):
        size = _size(text.removeprefix("blob:limit="))
        return None if size is None else ObjectFilter(blob_limit=size)
    if text.startswith("tree:"):
        depth = text.removeprefix("tree:")
        if depth.isdigit() and len(depth) <= 9:
            return ObjectFilter(tree_depth=int(depth))
    return None


def _size(text: str) -> int | None:
    number, unit = (text[:-1], text[-1].lower()) if text[-1:].isalpha() else (text, "")
    if not number.isdigit() or len(number) > 15 or unit not in _UNITS:
        return None
    return int(number) * _UNITS[unit]


def filtered(
    objects: BaseObjectStore, entries: Sequence[PackEntry], spec: ObjectFilter
) -> list[PackEntry]:
    """The entries dulwich would send, less what `spec` leaves out. An entry without a hint
    was named by the request (a want, or a tag followed by include-tag): always kept."""
    kept_deep = _shallow_enough(objects, entries, spec.tree_depth)
    kept: list[PackEntry] = []
    for sha, hint in entries:
        kind = hint[0] if isinstance(hint, tuple) else None
        if kind in (_TREE, _BLOB) and kept_deep is not None and sha not in kept_deep:
            continue
        if kind == _BLOB and spec.blob_limit is not None and not _small(objects, sha, spec):
            continue
        kept.append((sha, hint))
    return kept


def _small(objects: BaseObjectStore, sha: ObjectID, spec: ObjectFilter) -> bool:
    if spec.blob_limit == 0:
        return False
    try:
        size = probe_object(objects, sha.decode("ascii"), 0).size
    except SnapshotUnavailable:
        return True  # dulwich will report it missing as it would without a filter
    return spec.blob_limit is None or size < spec.blob_limit


def _shallow_enough(
    objects: BaseObjectStore, entries: Sequence[PackEntry], depth: int | None
) -> set[bytes] | None:
    """Trees and blobs of the pack whose least depth below a sent commit's root tree (or a
    wanted tree) is under `depth`; None when no depth is asked for. Only trees above that
    depth are read."""
    if depth is None:
        return None
    sending = {sha for sha, _ in entries}
    level: set[bytes] = set()
    for sha, hint in entries:
        kind = hint[0] if isinstance(hint, tuple) else _type(objects, sha)
        if kind == _COMMIT:
            commit = objects[sha]
            if isinstance(commit, Commit):
                level.add(commit.tree)
        elif kind == _TREE and not isinstance(hint, tuple):
            level.add(sha)
    kept: set[bytes] = set()
    for _ in range(depth):
        level = {sha for sha in level if sha in sending and sha not in kept}
        kept |= level
        following: set[bytes] = set()
        for parent in level:
            tree = _tree(objects, parent)
            if tree is not None:
                following.update(
                    entry.sha for entry in tree.iteritems() if stat.S_IFMT(entry.mode) != _GITLINK
                )
        level = following
        if not level:
            break
    return kept


def _type(objects: BaseObjectStore, sha: bytes) -> int | None:
    try:
        return probe_object(objects, sha.decode("ascii"), 0).type_num
    except (SnapshotUnavailable, UnicodeDecodeError):
        return None


def _tree(objects: BaseObjectStore, sha: bytes) -> Tree | None:
    if _type(objects, sha) != _TREE:
        return None
    tree = objects[ObjectID(sha)]
    return tree if isinstance(tree, Tree) else None


def all_reachable(
    objects: BaseObjectStore,
    tips: Iterable[bytes],
    wants: Iterable[bytes],
    *,
    commits: int = GIT_WALKS.negotiation_commits,
    trees: int = WANT_TREES,
) -> bool:
    """Whether every want is reachable from `tips`, within the walk's bounds: commits
    breadth first from the tips, each commit's whole tree before the next commit (what a
    checkout or a diff asks for is found near the top)."""
    missing = set(wants)
    if any(_type(objects, sha) is None for sha in missing):
        return False  # one lookup each: an id the store lacks costs no walk
    seen_commits: set[bytes] = set()
    seen_trees: set[bytes] = set()
    pending = deque(dict.fromkeys(tips))
    read_commits = read_trees = 0
    while pending and missing:
        sha = pending.popleft()
        if sha in seen_commits:
            continue
        seen_commits.add(sha)
        missing.discard(sha)
        kind = _type(objects, sha)
        if kind == _TAG:
            tag = objects[ObjectID(sha)]
            if isinstance(tag, Tag):
                pending.append(tag.object[1])
            continue
        root = sha if kind == _TREE else None  # a tag may name a tree
        if kind == _COMMIT:
            read_commits += 1
            commit = objects[ObjectID(sha)]
            if read_commits > commits or not isinstance(commit, Commit):
                return False
            pending.extend(commit.parents)
            root = commit.tree
        if root is not None:
            read_trees += _walk_tree(objects, root, missing, seen_trees, trees - read_trees)
            if read_trees > trees:
                return False
    return not missing


def _walk_tree(
    objects: BaseObjectStore, root: bytes, missing: set[bytes], seen: set[bytes], budget: int
) -> int:
    """Trees read below `root` (each once per check); what they name leaves `missing`.
    Returns more than `budget` when the budget ran out."""
    read = 0
    pending = [root]
    while pending and missing:
        sha = pending.pop()
        if sha in seen:
            continue
        seen.add(sha)
        missing.discard(sha)
        read += 1
        if read > budget:
            return read
        tree = _tree(objects, sha)
        if tree is None:
            continue
        for entry in tree.iteritems():
            if stat.S_ISDIR(entry.mode):
                pending.append(entry.sha)
            elif stat.S_IFMT(entry.mode) != _GITLINK:
                missing.discard(entry.sha)
    return read
