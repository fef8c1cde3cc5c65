"""Local repack and prune with real git pushes over smart HTTP and real disk measurements:
unreachable objects past the grace period go and their bytes come back; everything any
ref or review reaches stays readable; a push in flight never loses an object."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.ports.git import PackCollection

from tests.support.gitserve import PROJECT, Served, commit_all, git, new_repo, write_files
from tests.support.resources import tree_bytes

GRACE = timedelta(hours=1)
KIB = 1024
PUSHES = 12
RACE_SECONDS = 120


def _objects(served: Served) -> Path:
    return served.host._root / PROJECT / "objects"  # type: ignore[attr-defined]


def _pack_count(served: Served) -> int:
    return len(list((_objects(served) / "pack").glob("*.pack")))


def _age_everything(served: Served, by: timedelta = 2 * GRACE) -> None:
    """Make every stored pack and loose object look written `by` ago."""
    then = time.time() - by.total_seconds()
    for root, _dirs, files in os.walk(_objects(served)):
        for name in files:
            os.utime(os.path.join(root, name), (then, then))


def _collect(host: DiskGitHost, written_before: datetime, tips: list[str]) -> PackCollection:
    return host.collect_packs(PROJECT, [], tips, written_before, dry_run=False)


def _present(served: Served, sha: str) -> bool:
    canonical = served.store.repo_path(None)
    kind = git("cat-file", "-t", sha, cwd=canonical, check=False)
    assert kind in ("commit", "tree", "blob") or "could not get object info" in kind, kind
    return kind in ("commit", "tree", "blob")


def _connected(served: Served, forks: list[str]) -> None:
    """git's own connectivity check of canonical and each fork: nothing reachable missing."""
    for fork in [None, *forks]:
        repo = served.store.repo_path(fork)
        git("fsck", "--connectivity-only", "--no-dangling", cwd=repo)


@pytest.fixture
def lane(served: Served, tmp_path: Path) -> Path:
    """canonical imported by the owner; fork `fa` with agent-a's clone of canonical."""
    source = new_repo(tmp_path / "owner")
    write_files(source, {"README.md": "hello\n"})
    commit_all(source, "import")
    git("push", served.remote("owner-token"), "main", cwd=source)
    served.store.create_fork("fa")
    work = tmp_path / "agent"
    git("clone", "-q", served.remote("agent-a-token"), str(work), cwd=tmp_path)
    return work


def _push(served: Served, work: Path, files: dict[str, bytes | str], *extra: str) -> str:
    write_files(work, files)
    commit = commit_all(work, f"work {len(files)}")
    git("push", "-q", *extra, served.remote("agent-a-token", "fa"), "HEAD:main", cwd=work)
    return commit


def test_unreachable_objects_go_past_the_grace_and_their_bytes_come_back(
    served: Served, lane: Path
) -> None:
    kept = _push(served, lane, {"kept.txt": "stays\n"})
    lost = _push(served, lane, {"lost.bin": os.urandom(300 * KIB)})
    git("reset", "-q", "--hard", kept, cwd=lane)
    rewritten = _push(served, lane, {"other.txt": "force-pushed over\n"}, "--force")
    lost_tree = served.store.read_commit(lost).tree
    assert _pack_count(served) >= 4
    _age_everything(served)
    fresh_cutoff = datetime.now(UTC) - GRACE

    dry = served.host.collect_packs(PROJECT, [], [], fresh_cutoff, dry_run=True)
    assert dry.packs
    assert dry.bytes_reclaimed == 0
    assert _present(served, lost), "a dry run removes nothing"
    before = tree_bytes(_objects(served))
    collected = _collect(served.host, fresh_cutoff, [])
    after = tree_bytes(_objects(served))

    assert _pack_count(served) == 1, "one consolidated pack"
    assert not _present(served, lost)
    assert not _present(served, lost_tree)
    for commit in (kept, rewritten):
        assert _present(served, commit)
    _connected(served, ["fa"])
    assert before - after >= 300 * KIB, "the incompressible blob's bytes are back"
    # The report is in file sizes; the disk in blocks of up to 4 KiB per file.
    assert abs(collected.bytes_reclaimed - (before - after)) <= 4 * KIB * (2 * len(dry.packs) + 2)
    clone = lane.parent / "clone"
    git("clone", "-q", served.remote("agent-a-token", "fa"), str(clone), cwd=lane.parent)
    assert git("rev-parse", "HEAD", cwd=clone) == rewritten
    assert _collect(served.host, fresh_cutoff, []) == PackCollection(), "nothing left to do"


def test_a_reviews_commit_and_anything_newer_than_the_grace_stay(
    served: Served, lane: Path
) -> None:
    base = _push(served, lane, {"base.txt": "base\n"})
    reviewed = _push(served, lane, {"reviewed.bin": os.urandom(50 * KIB)})
    git("reset", "-q", "--hard", base, cwd=lane)
    _push(served, lane, {"moved.txt": "the fork moved away\n"}, "--force")
    _age_everything(served)
    git("reset", "-q", "--hard", base, cwd=lane)
    young = _push(served, lane, {"young.bin": os.urandom(50 * KIB)}, "--force")
    git("reset", "-q", "--hard", base, cwd=lane)
    _push(served, lane, {"again.txt": "and away again\n"}, "--force")

    _collect(served.host, datetime.now(UTC) - GRACE, [reviewed])

    assert _present(served, reviewed), "a review names it"
    assert _present(served, young), "unreachable, but written within the grace period"
    _connected(served, ["fa"])


def test_a_long_lived_store_reads_on_after_its_packs_are_repacked(
    served: Served, lane: Path, tmp_path: Path
) -> None:
    """The server keeps one store per project: its cached packs vanish under it."""
    head = _push(served, lane, {"a.txt": "a\n"})
    head = _push(served, lane, {"b.txt": "b\n"})
    store = served.store
    assert store.read_commit(head).tree
    _age_everything(served)
    assert _collect(served.host, datetime.now(UTC) - GRACE, []).packs

    [entry] = [e for e in store.read_tree(store.read_commit(head).tree) if e.name == b"b.txt"]
    assert store.read_blob(entry.sha) == b"b\n"
    store.open_snapshot(head).export_to(tmp_path / "export")
    assert (tmp_path / "export" / "a.txt").read_text() == "a\n"


def test_pushes_racing_repacks_lose_nothing(served: Served, lane: Path) -> None:
    """Real pushes while repacks run back to back, with a cutoff in the future so that
    every pack, a push's own included, is a candidate: only the maintenance lock and the
    check that no ref moved stand between a push in flight and its objects."""
    pushed: list[str] = []
    failures: list[str] = []

    def push_all() -> None:
        try:
            for index in range(PUSHES):
                files = {f"f{index}.bin": os.urandom(20 * KIB), "n.txt": f"{index}\n"}
                pushed.append(_push(served, lane, files))
        except AssertionError as failed:
            failures.append(str(failed))

    pusher = threading.Thread(target=push_all)
    future = datetime.now(UTC) + timedelta(days=1)
    removed, rounds = 0, 0
    deadline = time.monotonic() + RACE_SECONDS
    pusher.start()
    while pusher.is_alive() and time.monotonic() < deadline:
        removed += len(_collect(served.host, future, []).packs)
        rounds += 1
    pusher.join(timeout=RACE_SECONDS)

    assert not pusher.is_alive()
    assert failures == []
    assert len(pushed) == PUSHES
    removed += len(_collect(served.host, future, []).packs)
    assert removed > 0, f"the repacks ({rounds} rounds) must have deleted packs"
    _connected(served, ["fa"])
    for commit in pushed:
        assert _present(served, commit), commit
    clone = lane.parent / "after"
    git("clone", "-q", served.remote("agent-a-token", "fa"), str(clone), cwd=lane.parent)
    assert git("rev-parse", "HEAD", cwd=clone) == pushed[-1]
    assert (clone / f"f{PUSHES - 1}.bin").stat().st_size == 20 * KIB


def test_a_repack_waits_for_a_request_in_flight_and_then_deletes_nothing_if_it_ran_out(
    served: Served, lane: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _push(served, lane, {"a.txt": "a\n"})
    _push(served, lane, {"b.txt": "b\n"})
    _age_everything(served)
    monkeypatch.setattr("forkhorse.adapters.git.repack.LOCK_WAIT_SECONDS", 0.2)
    packs = _pack_count(served)

    with served.store.serving():  # a request in flight, for longer than the repack waits
        assert _collect(served.host, datetime.now(UTC) - GRACE, []) == PackCollection()
    assert _pack_count(served) == packs + 1, "the consolidated pack, and every old one"
    _connected(served, ["fa"])
    assert _collect(served.host, datetime.now(UTC) - GRACE, []).packs
