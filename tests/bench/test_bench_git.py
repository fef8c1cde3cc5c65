"""Git snapshot benchmarks: listing 10,000 files cold and cached against `git ls-tree -r`,
and 1,000 `stat` calls against 1,000 `read` calls. Run with `make bench`; figures print."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from forkhorse.adapters.git.disk import DiskGitHost, DiskGitStore
from forkhorse.domain.snapshot import SnapshotBudget

pytestmark = pytest.mark.bench

GIT_ENV = {
    "PATH": os.environ["PATH"],
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}
UNLIMITED = {"max_bytes": 1 << 40, "max_listed_paths": 1 << 30, "max_operations": 1 << 30}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, check=True)
    return done.stdout.decode()


def build_store(tmp_path: Path, files: dict[str, bytes]) -> tuple[str, Path]:
    source = tmp_path / "src"
    source.mkdir()
    git("init", "-q", "-b", "main", cwd=source)
    for name, content in files.items():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    git("add", "-A", cwd=source)
    git("commit", "-q", "-m", "bench", cwd=source)
    host = DiskGitHost(tmp_path / "state")
    store = host.store("bench")
    store.create_canonical()
    git("push", "-q", str(store.repo_path(None)), "main", cwd=source)
    git("gc", "-q", cwd=store.repo_path(None))  # packed, as a long-lived repository would be
    head = store.head()
    assert head is not None
    return head, store.repo_path(None)


def timed(action: Callable[[], object], repeat: int = 5) -> float:
    """Best of `repeat` runs, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def fresh(tmp_path: Path) -> DiskGitStore:
    """A store of its own, cold, as a new process opens it (a host keeps one per project)."""
    state = tmp_path / "state"
    return DiskGitStore("bench", state / "git" / "bench", state / "archives")


def test_listing_ten_thousand_files(tmp_path: Path) -> None:
    # Distinct contents, so every directory is its own tree object (no cache sharing).
    files = {f"d{i // 100:02d}/f{i % 100:02d}.txt": b"%d\n" % i for i in range(10_000)}
    head, bare = build_store(tmp_path, files)

    def cold() -> None:
        snapshot = fresh(tmp_path).open_snapshot(head)
        assert len(snapshot.reader(SnapshotBudget(**UNLIMITED)).list("")) == 10_000

    snapshot = fresh(tmp_path).open_snapshot(head)
    snapshot.reader(SnapshotBudget(**UNLIMITED)).list("")

    def cached() -> None:
        assert len(snapshot.reader(SnapshotBudget(**UNLIMITED)).list("")) == 10_000

    def ls_tree() -> None:
        assert git("ls-tree", "-r", "--name-only", head, cwd=bare).count("\n") == 10_000

    cold_ms, cached_ms, git_ms = timed(cold), timed(cached), timed(ls_tree)
    print(
        f"\nlist 10,000 files: cold {cold_ms:.1f} ms, cached {cached_ms:.1f} ms, "
        f"git ls-tree -r {git_ms:.1f} ms; cold/git {cold_ms / git_ms:.2f}x, "
        f"cached/git {cached_ms / git_ms:.2f}x, cold/cached {cold_ms / cached_ms:.1f}x"
    )
    assert cached_ms < cold_ms


def _stat_and_read(tmp_path: Path, files: dict[str, bytes]) -> tuple[float, float]:
    head, _ = build_store(tmp_path, files)
    paths = sorted(files)

    def stats() -> None:
        reader = fresh(tmp_path).open_snapshot(head).reader(SnapshotBudget(**UNLIMITED))
        for path in paths:
            assert reader.stat(path) is not None

    def reads() -> None:
        reader = fresh(tmp_path).open_snapshot(head).reader(SnapshotBudget(**UNLIMITED))
        for path in paths:
            assert reader.read(path) is not None

    return timed(stats, repeat=3), timed(reads, repeat=3)


def _name(index: int) -> str:
    return f"d{index // 100}/f{index % 100:02d}.txt"


@pytest.mark.parametrize("kind", ["distinct", "delta-compressed"])
def test_stat_against_read(tmp_path: Path, kind: str) -> None:
    """1,000 files of ~64 KiB: distinct content (whole objects in the pack), or near-copies
    that `git gc` stores as deltas (stat then has to rebuild each blob, as documented)."""
    shared = os.urandom(32 * 1024).hex().encode()
    files = {
        _name(index): (
            shared if kind == "delta-compressed" else os.urandom(32 * 1024).hex().encode()
        )
        + b"%d" % index
        for index in range(1_000)
    }
    stat_ms, read_ms = _stat_and_read(tmp_path, files)
    print(
        f"\n1,000 calls, ~64 KiB {kind} files, fresh snapshot: stat {stat_ms:.1f} ms, "
        f"read {read_ms:.1f} ms; read/stat {read_ms / stat_ms:.2f}x"
    )
