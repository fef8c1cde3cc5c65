"""Partial-clone filters and the bounded reachability of unadvertised wants (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dulwich.object_store import DiskObjectStore
from dulwich.objects import Blob, Commit, ObjectID, Tree
from forkhorse.githttp.filters import ObjectFilter, all_reachable, filtered, parse_filter


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (b"blob:none", ObjectFilter(blob_limit=0)),
        (b"blob:limit=1k", ObjectFilter(blob_limit=1024)),
        (b"blob:limit=2M", ObjectFilter(blob_limit=2 * 1024 * 1024)),
        (b"blob:limit=10", ObjectFilter(blob_limit=10)),
        (b"tree:0", ObjectFilter(tree_depth=0)),
        (b"tree:3", ObjectFilter(tree_depth=3)),
        (b"tree:-1", None),
        (b"tree:", None),
        (b"blob:limit=", None),
        (b"blob:limit=1x", None),
        (b"blob:limit=k", None),
        (b"sparse:oid=" + b"a" * 40, None),  # unsupported: a full pack, never a refusal
        (b"combine:blob:none+tree:1", None),
        (b"object:type=blob", None),
        (None, None),
    ],
)
def test_parse_filter(spec: bytes | None, expected: ObjectFilter | None) -> None:
    assert parse_filter(spec) == expected


def _commit(store: DiskObjectStore, files: dict[bytes, bytes], parents: list[ObjectID]) -> Commit:
    sub = Tree()
    root = Tree()
    for name, data in files.items():
        blob = Blob.from_string(data)
        store.add_object(blob)
        sub.add(name, 0o100644, blob.id)
    store.add_object(sub)
    root.add(b"dir", 0o040000, sub.id)
    store.add_object(root)
    commit = Commit()
    commit.tree = root.id
    commit.parents = parents
    commit.author = commit.committer = b"T <t@example.com>"
    commit.commit_time = commit.author_time = 0
    commit.commit_timezone = commit.author_timezone = 0
    commit.message = b"c"
    store.add_object(commit)
    return commit


@pytest.fixture
def chain(tmp_path: Path) -> tuple[DiskObjectStore, list[Commit], Commit]:
    """Five commits in a line, each with its own blob under dir/; and one unrelated commit."""
    store = DiskObjectStore.init(str(tmp_path / "objects"))
    commits: list[Commit] = []
    for index in range(5):
        parents = [commits[-1].id] if commits else []
        commits.append(_commit(store, {b"f": b"%d\n" % index}, parents))
    stray = _commit(store, {b"secret": b"not reachable\n"}, [])
    return store, commits, stray


def _blob(store: DiskObjectStore, commit: Commit) -> ObjectID:
    root = store[commit.tree]
    assert isinstance(root, Tree)
    sub = store[root[b"dir"][1]]
    assert isinstance(sub, Tree)
    return next(iter(sub.iteritems())).sha


def test_wants_are_reachable_only_from_the_tips_and_within_bounds(
    chain: tuple[DiskObjectStore, list[Commit], Commit],
) -> None:
    store, commits, stray = chain
    tip = [commits[-1].id]
    oldest = _blob(store, commits[0])
    assert all_reachable(store, tip, [oldest, commits[0].id, commits[2].tree])
    assert not all_reachable(store, tip, [_blob(store, stray)])
    assert not all_reachable(store, tip, [stray.id])
    assert not all_reachable(store, tip, [oldest, _blob(store, stray)])
    assert not all_reachable(store, tip, [b"1" * 40])  # missing: one lookup, no walk
    assert all_reachable(store, tip, [oldest], commits=5)
    assert not all_reachable(store, tip, [oldest], commits=4)  # past the commit bound
    assert all_reachable(store, tip, [_blob(store, commits[-1])], trees=2)
    assert not all_reachable(store, tip, [oldest], trees=5)  # past the tree bound


def test_filters_leave_out_what_git_leaves_out(
    chain: tuple[DiskObjectStore, list[Commit], Commit],
) -> None:
    store, commits, _ = chain
    commit = commits[-1]
    root = store[commit.tree]
    assert isinstance(root, Tree)
    sub = root[b"dir"][1]
    blob = _blob(store, commit)
    wanted_blob = _blob(store, commits[0])
    entries = [
        (commit.id, (1, None)),
        (commit.tree, (2, b"")),
        (sub, (2, b"dir")),
        (blob, (3, b"f")),
        (wanted_blob, None),  # named by a want: always sent
    ]

    def kept(spec: ObjectFilter) -> list[bytes]:
        return [sha for sha, _ in filtered(store, entries, spec)]

    assert kept(ObjectFilter(blob_limit=0)) == [commit.id, commit.tree, sub, wanted_blob]
    assert kept(ObjectFilter(blob_limit=2)) == [commit.id, commit.tree, sub, wanted_blob]
    assert kept(ObjectFilter(blob_limit=3)) == [commit.id, commit.tree, sub, blob, wanted_blob]
    assert kept(ObjectFilter(tree_depth=0)) == [commit.id, wanted_blob]
    assert kept(ObjectFilter(tree_depth=1)) == [commit.id, commit.tree, wanted_blob]
    assert kept(ObjectFilter(tree_depth=2)) == [commit.id, commit.tree, sub, wanted_blob]
    assert kept(ObjectFilter(tree_depth=3)) == [sha for sha, _ in entries]
