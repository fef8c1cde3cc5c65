"""Which objects a set of tips reaches, walked one commit, tree or tag at a time.

Blobs are never read (a tree entry's mode says what it is), so memory is the set of object
ids reached plus one parsed object; `limit` bounds that set, and a walk that would pass it
raises instead of returning a partial answer (a collector must then keep everything).
"""

from __future__ import annotations

import stat
from collections.abc import Iterable

from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, ObjectID, Tag, Tree

from forkhorse.ports.git import ReachTooLarge

DEFAULT_REACH_LIMIT = 5_000_000  # object ids, about 400 MiB of set at worst


def reachable(objects: BaseObjectStore, tips: Iterable[bytes], limit: int) -> set[bytes]:
    """The hex ids reachable from `tips` (missing objects count as reached: a tip may name
    one a concurrent push has not stored yet, and keeping too much is the safe side)."""
    seen: set[bytes] = set()
    pending = list(tips)
    while pending:
        sha = pending.pop()
        if sha in seen:
            continue
        if len(seen) >= limit:
            raise ReachTooLarge(f"more than {limit} objects are reachable")
        seen.add(sha)
        pending.extend(_children(objects, sha, seen))
    return seen


def _children(objects: BaseObjectStore, sha: bytes, seen: set[bytes]) -> list[bytes]:
    try:
        found = objects[ObjectID(sha)]
    except KeyError:
        return []
    if isinstance(found, Commit):
        return [found.tree, *found.parents]
    if isinstance(found, Tag):
        return [found.object[1]]
    if isinstance(found, Tree):
        children: list[bytes] = []
        for entry in found.iteritems():
            if stat.S_ISDIR(entry.mode):
                children.append(entry.sha)
            elif not _is_gitlink(entry.mode):  # a submodule's commit is not ours
                seen.add(entry.sha)  # a blob: reached, never read
        return children
    return []


def _is_gitlink(mode: int) -> bool:
    return stat.S_IFMT(mode) == 0o160000
