"""The real default image (Debian nodejs and git, npm's release): the smoke example and
`large-files`.

The image is built once per machine by the `default_ref` session fixture (about 100 s the
first time, then cached under IMAGE_HOME), hence the longer timeout of this module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from dulwich.repo import Repo
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.domain.checks import FullCheckDef, parse_checks

from tests.integration.containers.helpers import RunCheck

pytestmark = [pytest.mark.podman, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
SMOKE = REPO / "examples" / "smoke"
TEN_MB = 10_000_000


def full_check(checks_file: Path, name: str) -> FullCheckDef:
    for check in parse_checks(checks_file.read_text()):
        if isinstance(check, FullCheckDef) and check.name == name:
            return check
    raise AssertionError(f"{name} is not a full check in {checks_file}")


@pytest.fixture
def smoke(tmp_path: Path) -> Path:
    copy = tmp_path / "smoke"
    shutil.copytree(SMOKE, copy)
    return copy


def test_the_smoke_example_is_dependency_free_and_declares_npm_test() -> None:
    package = json.loads((SMOKE / "package.json").read_text())
    assert package == {"scripts": {"test": 'node -e "if (2 + 2 !== 4) process.exit(1)"'}}
    check = full_check(SMOKE / ".forkhorse/checks", "test")
    assert (check.image, check.run) == ("default", "npm test")


def test_the_smoke_example_passes_in_the_default_image(
    run_check: RunCheck, default_ref: str, smoke: Path
) -> None:
    check = full_check(smoke / ".forkhorse/checks", "test")
    attempt = run_check(check.run, reference=default_ref, source=smoke, timeout=120)
    assert (attempt.result.outcome, attempt.result.exit_code) == ("passed", 0)
    assert "> node -e" in attempt.result.stdout.text


def test_a_smoke_variant_with_process_exit_1_fails(
    run_check: RunCheck, default_ref: str, smoke: Path
) -> None:
    (smoke / "package.json").write_text(
        json.dumps({"scripts": {"test": 'node -e "process.exit(1)"'}})
    )
    attempt = run_check("npm test", reference=default_ref, source=smoke, timeout=120)
    assert attempt.result.outcome == "failed"
    assert attempt.result.exit_code == 1


def test_the_default_image_has_what_checks_rely_on(run_check: RunCheck, default_ref: str) -> None:
    attempt = run_check(
        "node --version && npm --version && git --version"
        " && test -f /etc/ssl/certs/ca-certificates.crt && timeout 5 sleep 0"
        " && sh -c 'echo sh-ok' && ls --version | head -n1",
        reference=default_ref,
    )
    assert attempt.result.outcome == "passed", attempt.result.stderr.text
    assert "sh-ok" in attempt.result.stdout.text
    assert "GNU coreutils" in attempt.result.stdout.text


# --- large-files: the repository's own full check ----------------------------------------


@pytest.fixture
def large_files() -> FullCheckDef:
    return full_check(REPO / ".forkhorse/checks", "large-files")


def test_large_files_is_registered_after_the_brand_quick_check_in_the_default_image(
    large_files: FullCheckDef,
) -> None:
    names = [check.name for check in parse_checks((REPO / ".forkhorse/checks").read_text())]
    assert names.index("brand-quick") < names.index("large-files") < names.index("brand")
    assert large_files.image == "default"


def sparse_file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)  # metadata only: the check must never need the contents


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    sparse_file(root / "docs" / "almost.bin", TEN_MB - 1)
    sparse_file(root / ".git" / "objects" / "pack" / "huge.pack", 5 * TEN_MB)  # excluded
    sparse_file(tmp_path / "outside.bin", 3 * TEN_MB)
    (root / "link-to-outside").symlink_to(tmp_path / "outside.bin")  # not followed
    (root / "link-to-dir").symlink_to(tmp_path)  # not followed either
    return root


def test_large_files_passes_below_ten_million_bytes(
    run_check: RunCheck, default_ref: str, large_files: FullCheckDef, tree: Path
) -> None:
    attempt = run_check(large_files.run, reference=default_ref, source=tree)
    assert attempt.result.outcome == "passed", attempt.result.stderr.text
    assert attempt.result.stdout.text == "No file of 10000000 bytes or more.\n"


@pytest.mark.parametrize("size", [TEN_MB, 3 * TEN_MB])
def test_large_files_fails_at_ten_million_bytes_or_more(
    run_check: RunCheck, default_ref: str, large_files: FullCheckDef, tree: Path, size: int
) -> None:
    sparse_file(tree / "assets" / "deep" / "video.mp4", size)
    attempt = run_check(large_files.run, reference=default_ref, source=tree)
    assert attempt.result.outcome == "failed"
    assert attempt.result.stderr.text == "Files of 10000000 bytes or more: assets/deep/video.mp4\n"


def test_large_files_never_reads_contents(
    run_check: RunCheck, default_ref: str, large_files: FullCheckDef, tree: Path
) -> None:
    unreadable = tree / "secret.bin"
    sparse_file(unreadable, TEN_MB)
    os.chmod(unreadable, 0)  # stat works, reading would fail
    attempt = run_check(large_files.run, reference=default_ref, source=tree)
    assert attempt.result.outcome == "failed"
    assert "secret.bin" in attempt.result.stderr.text
    assert "EACCES" not in attempt.result.stderr.text


def test_the_smoke_example_passes_from_an_exported_git_snapshot(
    run_check: RunCheck, default_ref: str, tmp_path: Path
) -> None:
    """The runner's path: commit, open the exact snapshot, export it, run the check on it."""
    worktree = tmp_path / "work"
    shutil.copytree(SMOKE, worktree)
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "smoke"]):
        subprocess.run([*git, *command], cwd=worktree, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=worktree, check=True, capture_output=True, text=True
    ).stdout.strip()
    store = DiskGitHost(tmp_path / "git").store("smoke")
    with Repo(str(worktree)) as repo:
        store.objects.add_objects([(repo.object_store[oid], None) for oid in repo.object_store])
    exported = tmp_path / "exported"
    store.open_snapshot(sha).export_to(exported)
    check = full_check(exported / ".forkhorse/checks", "test")
    attempt = run_check(check.run, reference=default_ref, source=exported, timeout=120)
    assert attempt.result.outcome == "passed"


def test_a_check_sees_a_git_checkout_of_the_exact_commit(
    run_check: RunCheck, default_ref: str, tmp_path: Path
) -> None:
    """Issue 30: `git rev-parse HEAD` is the reviewed commit, `git status` is clean and the
    history is there, inside the default image; what the check writes to `.git` stays in
    its overlay, never in the run's export."""
    worktree = tmp_path / "work"
    worktree.mkdir()
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=worktree, check=True)
    for index in range(3):
        (worktree / "file.txt").write_text(f"version {index}\n")
        subprocess.run([*git, "add", "-A"], cwd=worktree, check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"c{index}"], cwd=worktree, check=True)
    history = subprocess.run(
        ["git", "log", "--format=%H"], cwd=worktree, check=True, capture_output=True, text=True
    ).stdout.split()
    store = DiskGitHost(tmp_path / "git").store("history")
    with Repo(str(worktree)) as repo:
        store.objects.add_objects([(repo.object_store[oid], None) for oid in repo.object_store])
    exported = tmp_path / "exported"
    store.open_snapshot(history[0]).export_to(exported)
    before = {p: p.read_bytes() for p in (exported / ".git").rglob("*") if p.is_file()}
    script = (
        f'set -e; test "$(git rev-parse HEAD)" = {history[0]}; '
        'test -z "$(git status --porcelain)"; echo status-clean; '
        "git log --format=%H; "
        "echo inside > .git/written-by-check; git tag from-check; cat .git/written-by-check"
    )
    attempt = run_check(script, reference=default_ref, source=exported, timeout=120)
    assert attempt.result.outcome == "passed", attempt.result.stderr.text
    assert attempt.result.stdout.text.split() == ["status-clean", *history, "inside"]
    assert not (exported / ".git" / "written-by-check").exists()
    assert not (exported / ".git" / "refs" / "tags" / "from-check").exists()
    after = {p: p.read_bytes() for p in (exported / ".git").rglob("*") if p.is_file()}
    assert after == before
