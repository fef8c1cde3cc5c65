"""Quick-sandbox helpers: real git repositories read through the real disk snapshot reader
(the fixtures built on them are in tests/integration/sandbox/conftest.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dulwich.repo import Repo
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.receipts import CheckRecord
from forkhorse.domain.snapshot import SnapshotBudget
from forkhorse.ports.git import Snapshot, SnapshotReader

MODULE = ".forkhorse/quick/probe.py"
JS_MODULE = ".forkhorse/quick/probe.js"
BRAND = '{"name": "Forkhorse", "slug": "forkhorse", "mark": "FH"}\n'
SECRET = "forkhorse-test-secret-4f1c"
DEADLINE_MESSAGE = "The check did not finish within its 10-second deadline."


def assert_never_passed(record: CheckRecord) -> None:
    assert record.outcome != "passed", record
    assert SECRET not in record.message
    assert SECRET not in record.stdout.text
    assert SECRET not in record.stderr.text


def _git(*args: str, cwd: Path) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Tester",
        "GIT_AUTHOR_EMAIL": "tester@example.com",
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


class RecordingSnapshot:
    """The real snapshot, remembering each budget the sandbox created (to observe revocation)."""

    def __init__(self, inner: Snapshot) -> None:
        self._inner = inner
        self.budgets: list[SnapshotBudget] = []

    @property
    def commit(self) -> str:
        return self._inner.commit

    @property
    def tree(self) -> str:
        return self._inner.tree

    def reader(self, budget: SnapshotBudget) -> SnapshotReader:
        self.budgets.append(budget)
        return self._inner.reader(budget)

    def export_to(self, dest_dir: Path, deadline: float | None = None) -> None:
        self._inner.export_to(dest_dir, deadline)

    def export_tar(self, dest: IO[bytes], deadline: float | None = None) -> None:
        self._inner.export_tar(dest, deadline)


@dataclass
class Committed:
    worktree: Path
    snapshot: RecordingSnapshot


def make_committer(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Committed]:
    """Commit files with the git CLI, import them into a disk GitStore, open the snapshot."""
    counter = iter(range(1_000_000))

    def commit(files: dict[str, str | bytes]) -> Committed:
        index = next(counter)
        worktree = tmp_path / f"work{index}"
        worktree.mkdir()
        _git("init", "-q", "-b", "main", cwd=worktree)
        for name, content in files.items():
            target = worktree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)
        _git("add", "-A", cwd=worktree)
        _git("commit", "-q", "-m", "snapshot", cwd=worktree)
        sha = _git("rev-parse", "HEAD", cwd=worktree)
        store = DiskGitHost(tmp_path / f"state{index}").store("proj")
        with Repo(str(worktree)) as repo:
            store.objects.add_objects([(repo.object_store[s], None) for s in repo.object_store])
        return Committed(worktree, RecordingSnapshot(store.open_snapshot(sha)))

    return commit


RunModule = Callable[..., CheckRecord]


def module_runner(
    sandbox: BwrapSandbox,
    commit_files: Callable[[dict[str, str | bytes]], Committed],
    module: str,
) -> RunModule:
    def run(source: str, files: dict[str, str | bytes] | None = None) -> CheckRecord:
        committed = commit_files({"brand.json": BRAND, module: source, **(files or {})})
        return sandbox.run_check(committed.snapshot, QuickCheckDef(name="probe", module=module))

    return run
