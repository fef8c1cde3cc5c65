"""`forkhorse gc` on a local home: a dry run lists, a real run removes, once past the grace."""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.cli import main
from forkhorse.domain.model import Project
from forkhorse.records import get_record, put_record
from forkhorse.wiring.local import build_local_runtime

from tests.support.gitserve import (
    PROJECT,
    commit_all,
    import_as_canonical,
    import_objects,
    new_repo,
    write_files,
)
from tests.support.resources import tree_bytes
from tests.support.store import T0, crash_before_manifest, record


def _home_with_garbage(home: Path) -> tuple[str, str]:
    """An unreferenced record and a crashed put's chunks, both two hours old."""
    store = SqliteStore(home)
    old = datetime.now(UTC) - timedelta(hours=2)
    unreferenced = put_record(store, record(generation="stale"), old)
    orphan = crash_before_manifest(store, record(generation="crashed"), old)
    store.close()
    return unreferenced, orphan


def test_gc_lists_then_removes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    unreferenced, orphan = _home_with_garbage(home)

    assert main(["gc", "--home", str(home), "--grace-seconds", "10800"]) == 0
    assert "removed 0 records, 0 orphan chunk sets" in capsys.readouterr().out

    assert main(["gc", "--home", str(home), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert f"would remove record {unreferenced}" in dry
    assert f"would remove orphan chunks {orphan}" in dry

    assert main(["gc", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert f"removed record {unreferenced}" in out
    assert "removed 1 records, 1 orphan chunk sets" in out
    store = SqliteStore(home)
    assert get_record(store, unreferenced) is None
    assert list(store.stale_records(datetime.now(UTC))) == []
    store.close()


def test_gc_refuses_a_home_without_state(tmp_path: Path) -> None:
    assert main(["gc", "--home", str(tmp_path / "missing")]) == 2


def test_gc_repacks_a_projects_repositories_and_reports_the_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """canonical's history in one pack and an abandoned import's 200 KiB in another, both
    two hours old: gc leaves one pack and the disk shrinks by what it reports."""
    home = tmp_path / "home"
    store = SqliteStore(home)
    store.create_project(Project(id=PROJECT, name="p", owner_id="owner", created_at=T0))
    store.close()
    repos = DiskGitHost(home).store(PROJECT)
    source = new_repo(tmp_path / "canonical")
    write_files(source, {"README.md": "hello\n"})
    import_as_canonical(repos, source, commit_all(source))
    abandoned = new_repo(tmp_path / "abandoned")
    write_files(abandoned, {"big.bin": os.urandom(200 * 1024)})
    commit_all(abandoned)
    import_objects(repos, abandoned)
    objects = home / "git" / PROJECT / "objects"
    then = time.time() - 7200
    for path in objects.rglob("*"):
        os.utime(path, (then, then))
    before = tree_bytes(objects)

    assert main(["gc", "--home", str(home)]) == 0

    reported = int(re.findall(r"reclaimed (\d+) bytes", capsys.readouterr().out)[0])
    measured = before - tree_bytes(objects)
    assert measured >= 200 * 1024
    assert abs(reported - measured) <= 6 * 4096  # sizes against blocks, a few files
    assert len(list((objects / "pack").glob("*.pack"))) == 1
    head = repos.head()
    assert head is not None
    assert repos.read_commit(head).tree


def test_a_long_lived_local_runtime_collects_at_each_interval(tmp_path: Path) -> None:
    """Garbage made after the start is collected by the next interval, not the next start."""
    home = tmp_path / "home"
    runtime = build_local_runtime(home, collect_every=timedelta(seconds=0.2))
    try:
        assert runtime.supervisor.recovered(60)
        orphan = crash_before_manifest(
            runtime.store, record(generation="later"), datetime.now(UTC) - timedelta(hours=2)
        )
        deadline = time.monotonic() + 60
        while _has_orphan(runtime.store, orphan) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _has_orphan(runtime.store, orphan)
    finally:
        runtime.close()


def _has_orphan(store: SqliteStore, digest: str) -> bool:
    return any(stale.digest == digest for stale in store.stale_records(datetime.now(UTC)))
