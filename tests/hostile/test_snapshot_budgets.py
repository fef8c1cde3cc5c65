"""Attack 4 of issue 13 (tree bombs) and issue 15 item 8 / issue 30 (stat on a delta blob).

A tree bomb is a handful of objects: a tree of 300 entries that all name the same subtree,
nested a few times, so 4 objects expand to 27 million paths. Every budget must count what
is walked, repeated subtrees included, and stop the walk the moment it is spent; the
full-check export must stop at its path limit and inside the check's own timeout.
"""

from __future__ import annotations

import dataclasses
import errno
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit, Tree
from forkhorse.adapters.git import snapshot as snapshot_module
from forkhorse.adapters.git.disk import DiskGitHost, DiskGitStore
from forkhorse.adapters.git.probe import probe_object
from forkhorse.adapters.git.snapshot import DulwichSnapshot, Entry, TreeListing
from forkhorse.domain.checks import FullCheckDef
from forkhorse.domain.limits import EXPORT, SNAPSHOT, ExportLimits
from forkhorse.domain.run import RunRef
from forkhorse.domain.snapshot import (
    BudgetExceeded,
    ExportLimitExceeded,
    ExportTimedOut,
    SnapshotBudget,
)
from forkhorse.ports.git import Snapshot, SnapshotReader
from forkhorse.runner.workflow import steps
from forkhorse.runner.workflow.contracts import FullItem
from forkhorse.runner.workflow.steps import EXPORT_PREFIX, exported_checkout

from tests.integration.runner.scenarios import checks_file, full, quick
from tests.support.gitserve import commit_all, git, new_repo
from tests.support.resources import MIB, peak_of, rss_bytes, tree_bytes
from tests.support.runner import World

PROJECT = "proj"
WIDTH = 300
RSS_CEILING = 64 * MIB
# The run an export is for: only its generation names the checkout directory.
EXECUTION = RunRef(
    project_id=PROJECT,
    review_id="review-1",
    generation="execution-1",
    trigger="review-created",
    commit="0" * 40,
)
LIST_EVERYTHING = 'def check(ctx):\n    return {"ok": len(ctx.list("")) > 0}\n'


def _commit(store: DiskGitStore, tree: Tree) -> str:
    commit = Commit()
    commit.tree = tree.id
    commit.author = commit.committer = b"Bomber <bomber@example.invalid>"
    commit.author_time = commit.commit_time = 0
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"tree bomb\n"
    store.objects.add_object(commit)
    return commit.id.decode()


def plant_bomb(
    store: DiskGitStore, levels: int, leaf: bytes | None = b"x", checks: str | None = None
) -> str:
    """A commit whose `bomb/` holds WIDTH**levels paths made of levels + 1 objects.

    `leaf=None` ends every path in an empty directory: a bomb with no files at all.
    """
    node: Blob | Tree = Blob.from_string(leaf) if leaf is not None else Tree()
    mode = 0o100644 if leaf is not None else 0o040000
    store.objects.add_object(node)
    for level in range(levels):
        tree = Tree()
        for index in range(WIDTH):
            tree.add(f"{'fd'[min(level, 1)]}{index:03d}".encode(), mode, node.id)
        store.objects.add_object(tree)
        node, mode = tree, 0o040000
    root = Tree()
    root.add(b"bomb", 0o040000, node.id)
    if checks is not None:
        checks_blob = Blob.from_string(checks.encode())
        config = Tree()
        config.add(b"checks", 0o100644, checks_blob.id)
        store.objects.add_objects([(checks_blob, None), (config, None)])
        root.add(b".forkhorse", 0o040000, config.id)
    store.objects.add_object(root)
    return _commit(store, root)


@pytest.fixture
def store(tmp_path: Path) -> DiskGitStore:
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    store.create_canonical()
    return store


class _CountedEntries(tuple[Entry, ...]):
    """A listing's entries that count each one a walk iterates over."""

    counts: list[int]

    def __iter__(self) -> Iterator[Entry]:
        for entry in super().__iter__():
            self.counts.append(1)
            yield entry


@pytest.fixture
def visited(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every tree entry a walk really visits (repeated subtrees every time)."""
    counts: list[int] = []
    original = DulwichSnapshot.listing

    def counting(self: DulwichSnapshot, tree_sha: str) -> TreeListing:
        listing = original(self, tree_sha)
        entries = _CountedEntries(listing.entries)
        entries.counts = counts
        return TreeListing(entries, listing.by_name)

    monkeypatch.setattr(DulwichSnapshot, "listing", counting)
    return counts


def test_list_over_a_file_bomb_stops_at_the_listed_path_budget(
    store: DiskGitStore, visited: list[int]
) -> None:
    commit = plant_bomb(store, levels=3)  # 27,000,000 files from 4 objects
    budget = SnapshotBudget()
    reader = store.open_snapshot(commit).reader(budget)
    with peak_of(rss_bytes) as rss, pytest.raises(BudgetExceeded) as refused:
        reader.list("")
    assert str(refused.value) == "The check exceeded its budget of 2000 listed paths."
    assert sum(visited) <= SNAPSHOT.operations
    assert budget.used_listed_paths == 0  # a refused listing delivers and reserves nothing
    assert budget.used_operations <= SNAPSHOT.operations
    assert rss.growth < RSS_CEILING, f"RSS grew {rss.growth / MIB:.1f} MiB"
    print(f"file bomb list: {sum(visited)} entries visited, RSS +{rss.growth / MIB:.1f} MiB")


def test_list_over_a_directory_bomb_stops_at_the_operations_budget(
    store: DiskGitStore, visited: list[int]
) -> None:
    commit = plant_bomb(store, levels=4, leaf=None)  # 8.1e9 empty directories, no file
    budget = SnapshotBudget()
    reader = store.open_snapshot(commit).reader(budget)
    with peak_of(rss_bytes) as rss:
        with pytest.raises(BudgetExceeded) as refused:
            reader.list("")
        with pytest.raises(BudgetExceeded):
            reader.list("")  # the work already done stays charged: no free second walk
    assert str(refused.value) == (
        "The check exceeded its budget of 10000 tree entries and file calls."
    )
    assert sum(visited) <= SNAPSHOT.operations
    assert budget.used_operations <= SNAPSHOT.operations
    assert budget.used_operations > SNAPSHOT.operations - WIDTH  # stopped when spent
    assert rss.growth < RSS_CEILING, f"RSS grew {rss.growth / MIB:.1f} MiB"
    print(f"dir bomb list: {sum(visited)} entries visited, RSS +{rss.growth / MIB:.1f} MiB")


def test_stat_and_read_through_a_bomb_stop_at_the_budget(
    store: DiskGitStore, visited: list[int]
) -> None:
    commit = plant_bomb(store, levels=3, leaf=b"y" * 1024)
    budget = SnapshotBudget()
    reader = store.open_snapshot(commit).reader(budget)
    calls: list[str] = []
    with peak_of(rss_bytes) as rss, pytest.raises(BudgetExceeded) as refused:
        _stat_and_read_every_file(reader, calls)
    assert "budget" in str(refused.value)
    assert len(calls) <= SNAPSHOT.operations
    assert budget.used_bytes <= SNAPSHOT.read_bytes
    assert sum(visited) <= SNAPSHOT.operations
    assert rss.growth < RSS_CEILING, f"RSS grew {rss.growth / MIB:.1f} MiB"
    print(f"bomb stat/read: {len(calls)} calls, RSS +{rss.growth / MIB:.1f} MiB")


def _stat_and_read_every_file(reader: SnapshotReader, calls: list[str]) -> None:
    """What a module that walks the bomb by name does: stat, then read, every file."""
    for first in range(WIDTH):
        for second in range(WIDTH):
            for third in range(WIDTH):
                path = f"bomb/d{first:03d}/d{second:03d}/f{third:03d}"
                calls.append(path)
                assert reader.stat(path) == {"size": 1024, "binary": False}
                calls.append(path)
                assert reader.read(path) == "y" * 1024


def test_the_export_of_a_bomb_is_refused_at_the_path_limit(
    store: DiskGitStore, tmp_path: Path, visited: list[int]
) -> None:
    commit = plant_bomb(store, levels=3)  # 27,000,000 paths
    checkouts = tmp_path / "checkouts"
    checkouts.mkdir()
    snapshot = store.open_snapshot(commit)
    with (
        peak_of(lambda: tree_bytes(checkouts), interval=0.05) as disk,
        peak_of(rss_bytes) as rss,
        pytest.raises(ExportLimitExceeded) as refused,
    ):
        exported_checkout(checkouts)(EXECUTION, snapshot, time.monotonic() + 600)
    assert str(refused.value) == "The checkout exceeds the export limit of 50,000 paths."
    assert list(checkouts.iterdir()) == [], "a refused export leaves no partial directory"
    assert sum(visited) <= EXPORT.paths + 1  # measured, then refused at the first path past
    assert disk.peak == 0, "the bomb is refused before anything is written"
    assert rss.growth < RSS_CEILING, f"RSS grew {rss.growth / MIB:.1f} MiB"
    print(f"bomb export: {disk.peak} bytes on disk, RSS +{rss.growth / MIB:.1f} MiB")


def test_the_tar_export_of_a_bomb_is_refused_before_its_first_byte(
    store: DiskGitStore, tmp_path: Path
) -> None:
    commit = plant_bomb(store, levels=3)
    with (tmp_path / "bomb.tar").open("wb") as archive:
        with pytest.raises(ExportLimitExceeded, match="50,000 paths"):
            store.open_snapshot(commit).export_tar(archive, time.monotonic() + 600)
        assert archive.tell() == 0
    with pytest.raises(ExportLimitExceeded, match="50,000 paths"):
        store.publish_archive(commit, time.monotonic() + 600)
    assert list((tmp_path / "state" / "archives").iterdir()) == [], "nothing is published"


def test_an_export_that_fails_while_writing_leaves_nothing(
    store: DiskGitStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails part way (here a full disk, injected) removes the partial tree."""
    commit = plant_bomb(store, levels=2)  # 90,000 paths, within the limits
    limits = ExportLimits(paths=100_000)
    written: list[str] = []
    original = snapshot_module._write_file

    def disk_fills_up(dir_fd: int, entry: Entry, data: bytes) -> None:
        if len(written) == 500:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(entry.name)
        original(dir_fd, entry, data)

    monkeypatch.setattr(snapshot_module, "_write_file", disk_fills_up)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space"):
        store.open_snapshot(commit).export_to(out, time.monotonic() + 600, limits)
    assert len(written) == 500
    assert not out.exists()


def test_the_export_byte_limit_is_counted_before_writing(
    store: DiskGitStore, tmp_path: Path
) -> None:
    commit = plant_bomb(store, levels=2, leaf=b"z" * 64 * 1024)  # 90,000 x 64 KiB
    limits = ExportLimits(bytes=1024 * 1024)
    out = tmp_path / "out"
    with pytest.raises(ExportLimitExceeded) as refused:
        store.open_snapshot(commit).export_to(out, limits=limits)
    assert str(refused.value) == "The checkout exceeds the export limit of 1,048,576 bytes."
    assert not out.exists()


def test_an_export_past_its_deadline_is_timed_out_and_leaves_nothing(
    store: DiskGitStore, tmp_path: Path
) -> None:
    commit = plant_bomb(store, levels=3)
    snapshot = store.open_snapshot(commit)
    checkouts = tmp_path / "checkouts"
    checkouts.mkdir()
    with pytest.raises(ExportTimedOut):
        exported_checkout(checkouts)(EXECUTION, snapshot, time.monotonic())
    assert list(checkouts.iterdir()) == []
    with pytest.raises(ExportTimedOut):
        store.publish_archive(commit, time.monotonic())
    archives = tmp_path / "state" / "archives"
    assert list(archives.iterdir()) == [], "a refused archive is not kept"


def _repacked_text_versions(
    tmp_path: Path, lines: int, name: str
) -> tuple[bytes, DiskGitStore, tuple[str, str]]:
    """Two versions of one text file, repacked so the later one is stored as a delta."""
    repo = new_repo(tmp_path / "delta")
    body = b"".join(b"line %d of a long text file\n" % index for index in range(lines))
    (repo / name).write_bytes(body)
    commit_all(repo, "v1")
    (repo / name).write_bytes(body + b"one more line\n")
    head = commit_all(repo, "v2")
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    store.create_canonical()
    git("push", "-q", str(store.repo_path(None)), "HEAD:refs/heads/main", cwd=repo)
    git("repack", "-adq", cwd=store.repo_path(None))
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    return body, store, _a_delta_version(store, repo, head, name)


def test_stat_on_a_large_delta_blob_charges_its_sample_and_never_rebuilds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: a delta blob past the byte budget is stat'ed for its 8 KiB sample, as the
    spec says, built from only the instructions and base bytes that make that sample."""
    body, store, (delta_commit, delta_blob) = _repacked_text_versions(tmp_path, 90_000, "big.txt")
    rebuilt: list[str] = []
    original = snapshot_module.read_raw

    def counting(objects: object, sha: str) -> bytes:
        rebuilt.append(sha)
        return original(objects, sha)  # type: ignore[arg-type]

    budget = SnapshotBudget()
    reader = store.open_snapshot(delta_commit).reader(budget)
    monkeypatch.setattr(snapshot_module, "read_raw", counting)
    with peak_of(rss_bytes) as rss:
        stat = reader.stat("big.txt")
    assert stat is not None
    assert stat["binary"] is False
    assert stat["size"] > SNAPSHOT.read_bytes
    assert delta_blob not in rebuilt, "the delta's whole blob is never rebuilt"
    assert budget.used_bytes == 8192
    assert rss.growth < RSS_CEILING
    assert len(body) > SNAPSHOT.read_bytes
    print(f"large delta stat: 8 KiB charged, RSS +{rss.growth / MIB:.1f} MiB")


def test_stat_on_a_small_delta_blob_charges_its_sample(tmp_path: Path) -> None:
    _, store, (delta_commit, _) = _repacked_text_versions(tmp_path, 20_000, "text.txt")
    budget = SnapshotBudget()
    stat = store.open_snapshot(delta_commit).reader(budget).stat("text.txt")
    assert stat is not None
    assert stat["size"] > 8192
    assert budget.used_bytes == 8192  # the sample, not the blob


def _a_delta_version(
    store: DiskGitStore, repo: Path, head: str, name: str = "big.txt"
) -> tuple[str, str]:
    """The commit (of `head` and its parent) whose `name` is stored as a delta, and that blob."""
    for revision in (head, f"{head}~1"):
        blob = git("rev-parse", f"{revision}:{name}", cwd=repo)
        if probe_object(store.objects, blob, 0).prefix is None:
            return git("rev-parse", revision, cwd=repo), blob
    raise AssertionError("git made no delta of either version")


@pytest.mark.podman
@pytest.mark.sandbox
def test_a_quick_check_listing_a_bomb_fails_on_its_budget(world: World) -> None:
    store = world.runtime.git.store(PROJECT)
    checks = checks_file(quick("lister", "lister"))
    tree_commit = plant_bomb(store, levels=3, checks=checks)
    module = {".forkhorse/quick/lister.py": LIST_EVERYTHING}
    commit = _with_files(store, tree_commit, module)
    with peak_of(rss_bytes) as rss:
        run = world.review_commit(commit)
        world.run(run)
    summary = world.summary(run.review_id)
    assert summary.status == "failed"
    (check,) = summary.checks
    assert (check.name, check.outcome) == ("lister", "failed")
    assert check.message == "The check exceeded its budget of 2000 listed paths."
    assert rss.growth < RSS_CEILING, f"RSS grew {rss.growth / MIB:.1f} MiB"
    print(f"quick check listing a bomb: RSS +{rss.growth / MIB:.1f} MiB")


@pytest.mark.podman
def test_a_full_check_over_a_bomb_ends_at_the_export_limit_before_any_container(
    world: World,
) -> None:
    store = world.runtime.git.store(PROJECT)
    bombed = full("bombed", "true", timeout=600)  # the path limit, not the clock, ends it
    commit = plant_bomb(store, levels=3, checks=checks_file(bombed))
    checkouts = world.runtime.home / "checkouts"
    with peak_of(rss_bytes) as rss:
        run = world.review_commit(commit)
        world.run(run)
    summary = world.summary(run.review_id)
    assert summary.status == "failed"
    (check,) = summary.checks
    assert (check.name, check.outcome) == ("bombed", "failed")
    assert check.message == "The checkout exceeds the export limit of 50,000 paths."
    assert world.record(run.review_id).checks[0].message == check.message
    assert world.containers.started == [], "no container starts when the export failed"
    assert not [path for path in checkouts.rglob("*") if path.name.startswith(EXPORT_PREFIX)]
    assert rss.growth < RSS_CEILING, f"RSS grew {rss.growth / MIB:.1f} MiB"
    print(f"full check over a bomb: RSS +{rss.growth / MIB:.1f} MiB")


@pytest.mark.podman
def test_a_full_check_whose_export_outlasts_its_timeout_is_timed_out(
    world: World,
) -> None:
    store = world.runtime.git.store(PROJECT)
    commit = plant_bomb(store, levels=3, checks=checks_file(full("slow-export", "true")))
    run = world.review_commit(commit)
    checkouts = world.runtime.home / "checkouts"
    real_source = exported_checkout(checkouts)

    def out_of_time(run: RunRef, snapshot: Snapshot, deadline: float) -> Path:
        return real_source(run, snapshot, time.monotonic())

    deps = dataclasses.replace(world.runtime.deps, checkout_source=out_of_time)
    check = FullCheckDef.model_validate({**full("slow-export", "true"), "tier": "full"})
    result = steps.full_start(deps, FullItem(run=run, check=check))
    assert result.done is True
    assert result.outcome == "timed-out"
    assert world.containers.started == []
    assert list(checkouts.iterdir()) == []


def _with_files(store: DiskGitStore, commit: str, files: dict[str, str]) -> str:
    """The same tree plus `.forkhorse/quick/<module>` files, as a new commit."""
    root = Tree.from_string(store.objects[store.read_commit(commit).tree.encode()].as_raw_string())
    config = Tree.from_string(store.objects[root[b".forkhorse"][1]].as_raw_string())
    quick_tree = Tree()
    for path, text in files.items():
        blob = Blob.from_string(text.encode())
        store.objects.add_object(blob)
        quick_tree.add(path.rsplit("/", 1)[1].encode(), 0o100644, blob.id)
    store.objects.add_object(quick_tree)
    config.add(b"quick", 0o040000, quick_tree.id)
    store.objects.add_object(config)
    root.add(b".forkhorse", 0o040000, config.id)
    store.objects.add_object(root)
    return _commit(store, root)
