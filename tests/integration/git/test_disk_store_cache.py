"""`DiskGitHost` keeps one `DiskGitStore` per project, on real pack files: the same store
comes back; at most a few are kept and an idle one is closed; a store closed while another
thread holds it reads on (dulwich reopens its packs); reads through the one store go on
while pushes add packs; and a repack that deletes packs, by that store or by another
process's, leaves every object readable through it and no deleted pack open."""

from __future__ import annotations

import gc
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dulwich.object_store import PackBasedObjectStore
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree
from forkhorse.adapters.git.disk import IDLE_CLOSE_SECONDS, DiskGitHost, DiskGitStore
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.domain.snapshot import SnapshotBudget, SnapshotUnavailable

from tests.support.resources import open_fds

SETTLE_SECONDS = 20.0  # how long a test waits for the idle close; it should take well under 1 s
IDLE = 0.2
# An open pack is its index and its data, each an open file and the duplicate that its
# mmap keeps (CPython's mmap dups the descriptor).
FILES_PER_PACK = 4
AUTHOR = b"Forkhorse Tests <tests@forkhorse.invalid>"


def _pack_files_open(objects_dir: Path) -> list[str]:
    """This process's open files inside a project's pack directory (a deleted one ends in
    ' (deleted)')."""
    pack_dir = str(objects_dir / "pack") + "/"
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(pack_dir):
            found.append(target)
    return found


def _blobs_pack(objects: PackBasedObjectStore, tag: str, count: int = 3) -> list[str]:
    """Write `count` blobs as one new pack; their SHAs."""
    blobs = [Blob.from_string(f"{tag} {index}\n".encode()) for index in range(count)]
    objects.add_objects([(blob, None) for blob in blobs])
    return [blob.id.decode() for blob in blobs]


def _commit_pack(objects: PackBasedObjectStore, parent: str | None, index: int) -> Commit:
    """A commit with two files of its own, written as one new pack."""
    blobs = [Blob.from_string(f"file {index} {n}\n".encode()) for n in range(2)]
    tree = Tree()
    for n, blob in enumerate(blobs):
        tree.add(f"f{n}.txt".encode(), 0o100644, blob.id)
    commit = Commit()
    commit.tree = tree.id
    commit.parents = [ObjectID(parent.encode())] if parent else []
    commit.author = commit.committer = AUTHOR
    commit.author_time = commit.commit_time = 1_790_000_000 + index
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = f"c{index}\n".encode()
    written: list[ShaFile] = [*blobs, tree, commit]
    objects.add_objects([(obj, None) for obj in written])
    return commit


def _history(store: DiskGitStore, packs: int) -> list[Commit]:
    """Canonical's main at the last of `packs` commits, one pack each."""
    store.create_canonical()
    commits: list[Commit] = []
    for index in range(packs):
        parent = commits[-1].id.decode() if commits else None
        commits.append(_commit_pack(store.objects, parent, index))
    capability = mint_canonical_write_capability(store.project)
    assert store.update_canonical_ref(capability, "refs/heads/main", None, commits[-1].id.decode())
    return commits


def _read_history(store: DiskGitStore, commits: list[Commit], first: int = 0) -> None:
    """Every object of every commit (the first one `first`), through the store and through
    a snapshot."""
    for index, commit in enumerate(commits, first):
        sha = commit.id.decode()
        info = store.read_commit(sha)
        assert info.tree == commit.tree.decode()
        entries = store.read_tree(info.tree)
        assert [entry.name for entry in entries] == [b"f0.txt", b"f1.txt"]
        for n, entry in enumerate(entries):
            assert store.read_blob(entry.sha) == f"file {index} {n}\n".encode()
        reader = store.open_snapshot(sha).reader(SnapshotBudget())
        assert reader.read("f1.txt") == f"file {index} 1\n"


def _wait_until(condition: object, seconds: float = SETTLE_SECONDS) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def host(tmp_path: Path) -> DiskGitHost:
    return DiskGitHost(tmp_path / "state", idle_seconds=60.0)


def test_the_idle_period_is_well_under_the_live_fd_settle_wait() -> None:
    assert IDLE_CLOSE_SECONDS <= 10.0


def test_the_same_store_comes_back_for_a_project(host: DiskGitHost) -> None:
    first = host.store("alpha")
    assert host.store("alpha") is first
    assert host.store("beta") is not first
    assert host.store("alpha") is first
    assert host.cached() == ["beta", "alpha"]
    host.close()
    assert host.cached() == []
    assert host.store("alpha") is not first, "a closed host keeps nothing"


def test_past_the_bound_the_least_recently_used_store_is_dropped_and_closed(
    tmp_path: Path,
) -> None:
    host = DiskGitHost(tmp_path / "state", cached_projects=2, idle_seconds=60.0)
    stores: dict[str, DiskGitStore] = {}
    blobs: dict[str, list[str]] = {}
    for project in ("p0", "p1"):
        stores[project] = host.store(project)
        blobs[project] = _blobs_pack(stores[project].objects, project)
        assert stores[project].read_blob(blobs[project][0]) == f"{project} 0\n".encode()
        assert _pack_files_open(stores[project].objects_dir), "reading opened the pack"
    host.store("p0")  # p0 is now the most recently used: p1 goes next
    third = host.store("p2")
    assert host.cached() == ["p0", "p2"]
    assert not _pack_files_open(stores["p1"].objects_dir), "the dropped store's packs closed"
    assert _pack_files_open(stores["p0"].objects_dir), "a kept store keeps its packs open"
    assert host.store("p1") is not stores["p1"]
    assert host.cached() == ["p2", "p1"]
    assert not _pack_files_open(stores["p0"].objects_dir)
    assert third is host.store("p2")
    # The dropped store still reads (its packs reopen), for whoever still holds it.
    assert stores["p0"].read_blob(blobs["p0"][2]) == b"p0 2\n"
    stores["p0"].close_packs()
    host.close()


def test_an_idle_store_is_closed_and_open_files_return_to_the_baseline(tmp_path: Path) -> None:
    host = DiskGitHost(tmp_path / "state", idle_seconds=IDLE)
    writer = DiskGitHost(tmp_path / "state")  # another host: another process
    shas = [sha for n in range(4) for sha in _blobs_pack(writer.store("quiet").objects, f"{n}")]
    writer.close()
    gc.collect()
    baseline = open_fds(os.getpid())
    store = host.store("quiet")
    assert all(store.read_blob(sha) for sha in shas)
    assert len(_pack_files_open(store.objects_dir)) == 4 * FILES_PER_PACK
    assert _idle_close_threads(tmp_path) == 1
    _wait_until(lambda: open_fds(os.getpid()) <= baseline)
    assert open_fds(os.getpid()) <= baseline
    assert not _pack_files_open(store.objects_dir)
    assert host.cached() == []
    _wait_until(lambda: _idle_close_threads(tmp_path) == 0)
    assert _idle_close_threads(tmp_path) == 0, "with nothing kept, the thread ends"
    # Asked for again, a new store reads the same objects.
    again = host.store("quiet")
    assert again is not store
    assert [again.read_blob(sha) for sha in shas] == [store.read_blob(sha) for sha in shas]
    store.close_packs()
    host.close()
    assert not _pack_files_open(store.objects_dir)


def _idle_close_threads(tmp_path: Path) -> int:
    """The idle-close threads of the hosts over `tmp_path / "state"`."""
    root = str(tmp_path / "state")
    return sum(1 for thread in threading.enumerate() if thread.name.endswith(root + "/git"))


def test_a_store_closed_while_another_thread_holds_it_reads_on(tmp_path: Path) -> None:
    host = DiskGitHost(tmp_path / "state", idle_seconds=IDLE)
    store = host.store("held")
    commits = _history(store, 4)
    snapshot = store.open_snapshot(commits[-1].id.decode())  # a quick check holds this
    _read_history(store, commits)
    _wait_until(lambda: host.cached() == [] and not _pack_files_open(store.objects_dir))
    assert host.cached() == [], "idle: dropped and closed"
    assert not _pack_files_open(store.objects_dir)
    errors: list[BaseException] = []

    def holder() -> None:
        try:
            for _ in range(20):
                _read_history(store, commits)
                assert snapshot.reader(SnapshotBudget()).read("f0.txt") == "file 3 0\n"
        except BaseException as error:  # reported by the test below
            errors.append(error)

    readers = [threading.Thread(target=holder) for _ in range(3)]
    for reader in readers:
        reader.start()
    while any(reader.is_alive() for reader in readers):
        store.close_packs()  # closed again and again under the readers' feet
        time.sleep(0.001)
    for reader in readers:
        reader.join()
    assert errors == []
    store.close_packs()
    host.close()


def test_threads_read_through_one_store_while_pushes_add_packs(tmp_path: Path) -> None:
    host = DiskGitHost(tmp_path / "state", idle_seconds=60.0)
    pusher = DiskGitHost(tmp_path / "state")  # a push request has its own view
    known: list[tuple[str, bytes]] = []
    known_lock = threading.Lock()
    for sha in _blobs_pack(host.store("busy").objects, "first"):
        known.append((sha, host.store("busy").read_blob(sha)))
    errors: list[BaseException] = []
    pushing = threading.Event()
    pushing.set()
    stores: list[DiskGitStore] = []

    def reader() -> None:
        try:
            while pushing.is_set():
                store = host.store("busy")
                stores.append(store)
                with known_lock:
                    expected = list(known)
                for sha, content in expected:
                    assert store.read_blob(sha) == content
        except BaseException as error:  # reported by the test below
            errors.append(error)

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for thread in readers:
        thread.start()
    try:
        for push in range(12):
            objects = pusher.store("busy")._open_objects()
            try:
                shas = _blobs_pack(objects, f"push{push}")
            finally:
                objects.close()
            with known_lock:
                known.extend((sha, f"push{push} {n}\n".encode()) for n, sha in enumerate(shas))
            time.sleep(0.01)
    finally:
        pushing.clear()
        for thread in readers:
            thread.join()
    assert errors == []
    assert {id(store) for store in stores} == {id(host.store("busy"))}, "one store throughout"
    for sha, content in known:
        assert host.store("busy").read_blob(sha) == content
    assert len(list((host.store("busy").objects_dir / "pack").glob("*.pack"))) == 13
    assert len(_pack_files_open(host.store("busy").objects_dir)) == 13 * FILES_PER_PACK
    host.close()
    pusher.close()


def _deleted(objects_dir: Path) -> list[str]:
    return [path for path in _pack_files_open(objects_dir) if path.endswith(" (deleted)")]


def test_a_repack_through_the_kept_store_leaves_everything_readable(host: DiskGitHost) -> None:
    store = host.store("repacked")
    commits = _history(store, 6)
    _read_history(store, commits)  # every pack open, index and data
    packs_before = sorted((store.objects_dir / "pack").glob("*.pack"))
    collection = host.store("repacked").repack([], datetime.now(UTC), dry_run=False)
    assert len(collection.packs) == 6
    assert not any(path.exists() for path in packs_before), "the repack deleted them all"
    assert host.store("repacked") is store
    assert not _deleted(store.objects_dir), "the store let go of the deleted packs"
    _read_history(store, commits)
    assert len(_pack_files_open(store.objects_dir)) == FILES_PER_PACK, "the consolidated one"
    host.close()


def test_a_repack_by_another_process_leaves_everything_readable(host: DiskGitHost) -> None:
    """The kept store only learns of it when a lookup fails: packs whose index it has open
    but whose data it never read must be dropped and the pack directory rescanned."""
    store = host.store("elsewhere")
    commits = _history(store, 6)
    store.close_packs()
    # A missing object's lookup opens every pack's index, and no pack's data.
    with pytest.raises(SnapshotUnavailable):
        store.read_blob("0" * 40)
    assert len(_pack_files_open(store.objects_dir)) == 6 * FILES_PER_PACK // 2
    other = DiskGitHost(store.objects_dir.parent.parent.parent)  # another process's host
    assert other.store("elsewhere") is not store
    collection = other.store("elsewhere").repack([], datetime.now(UTC), dry_run=False)
    other.close()
    assert len(collection.packs) == 6
    assert len(list((store.objects_dir / "pack").glob("*.pack"))) == 1
    _read_history(store, commits)
    assert host.store("elsewhere") is store
    assert not _deleted(store.objects_dir), "each vanished pack was dropped on its miss"
    host.close()
    assert not _pack_files_open(store.objects_dir)
