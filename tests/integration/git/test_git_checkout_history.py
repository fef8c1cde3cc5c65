"""A full check's checkout is a Git checkout of the exact reviewed commit (issue 30).

The export (a directory locally, a tar archive on AWS) carries a minimal `.git`: HEAD
detached at the commit, a pack of only the objects that commit reaches, an index matching
the tree. These tests drive the real git CLI against what was exported, from the host.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from forkhorse.adapters.containers.fargate import CHECK_UID
from forkhorse.adapters.git.disk import DiskGitHost, DiskGitStore
from forkhorse.domain.limits import ExportLimits

from tests.support.gitserve import (
    PROJECT,
    commit_all,
    git,
    import_objects,
    new_repo,
    write_files,
)

AS_CHECK_USER = ("setpriv", f"--reuid={CHECK_UID}", f"--regid={CHECK_UID}", "--clear-groups")
SECRET = "fork B's secret, never to be seen by fork A's checks\n"


def linear(path: Path, count: int) -> tuple[Path, list[str]]:
    """`count` commits, each changing a file, plus a symlink, an executable and a subdir."""
    repo = new_repo(path)
    commits = []
    for index in range(count):
        write_files(repo, {"file.txt": f"version {index}\n", f"dir/f{index}.txt": "x\n"})
        (repo / "run.sh").write_text("#!/bin/sh\n")
        (repo / "run.sh").chmod(0o755)
        if not (repo / "link").is_symlink():
            os.symlink("file.txt", repo / "link")
        commits.append(commit_all(repo, f"c{index}"))
    git("tag", "-a", "v1.0", "-m", "v1.0", commits[0], cwd=repo)
    return repo, commits


def in_store(store: DiskGitStore, repo: Path) -> None:
    import_objects(store, repo)


def log(checkout: Path) -> list[str]:
    return git("log", "--format=%H", cwd=checkout).split()


def assert_exact_checkout(checkout: Path, commit: str) -> None:
    assert git("rev-parse", "HEAD", cwd=checkout) == commit
    assert git("status", "--porcelain", "--untracked-files=all", cwd=checkout) == ""
    assert git("fsck", "--no-dangling", cwd=checkout, check=False) == ""
    assert not (checkout / ".git" / "objects" / "info" / "alternates").exists()
    assert git("symbolic-ref", "-q", "HEAD", cwd=checkout, check=False) == ""  # detached


def test_the_directory_export_is_a_checkout_of_the_exact_commit(tmp_path: Path) -> None:
    repo, commits = linear(tmp_path / "src", 5)
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    in_store(store, repo)
    out = tmp_path / "export"
    store.open_snapshot(commits[3]).export_to(out)
    assert_exact_checkout(out, commits[3])
    assert log(out) == commits[3::-1]  # the whole history, and nothing after the commit
    assert not (out / ".git" / "shallow").exists()
    assert git("describe", "--always", cwd=out) == commits[3][:7]
    assert git("diff", "--name-only", "HEAD~1", "HEAD", cwd=out).split() == [
        "dir/f3.txt",
        "file.txt",
    ]


def test_the_archive_unpacks_to_the_same_checkout(tmp_path: Path) -> None:
    repo, commits = linear(tmp_path / "src", 3)
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    in_store(store, repo)
    first, second = io.BytesIO(), io.BytesIO()
    store.open_snapshot(commits[2]).export_tar(first)
    store.open_snapshot(commits[2]).export_tar(second)
    assert first.getvalue() == second.getvalue()  # still deterministic
    out = tmp_path / "unpacked"
    with tarfile.open(fileobj=io.BytesIO(first.getvalue())) as archive:
        archive.extractall(out, filter="tar")
    assert_exact_checkout(out, commits[2])
    assert log(out) == commits[::-1]


def test_a_history_past_the_commit_bound_is_shallow(tmp_path: Path) -> None:
    repo, commits = linear(tmp_path / "src", 6)
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    in_store(store, repo)
    out = tmp_path / "export"
    store.open_snapshot(commits[5]).export_to(out, limits=ExportLimits(history_commits=3))
    assert_exact_checkout(out, commits[5])
    assert log(out) == commits[5:2:-1]  # git log works up to the boundary
    assert (out / ".git" / "shallow").read_text() == f"{commits[3]}\n"
    assert git("rev-parse", "--is-shallow-repository", cwd=out) == "true"


def test_a_history_past_the_byte_bound_is_shallow(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "src")
    commits = []
    for index in range(4):
        write_files(repo, {"big.bin": os.urandom(64 * 1024)})
        commits.append(commit_all(repo, f"c{index}"))
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    in_store(store, repo)
    out = tmp_path / "export"
    # Each commit brings a new 64 KiB blob: room for the commit and its parent only.
    limits = ExportLimits(history_bytes=2 * 64 * 1024 + 4096)
    store.open_snapshot(commits[3]).export_to(out, limits=limits)
    assert_exact_checkout(out, commits[3])
    assert log(out) == [commits[3], commits[2]]
    assert (out / ".git" / "shallow").read_text() == f"{commits[2]}\n"
    tight = tmp_path / "tight"  # the commit itself is always kept, even past the bound
    store.open_snapshot(commits[3]).export_to(tight, limits=ExportLimits(history_bytes=1))
    assert_exact_checkout(tight, commits[3])
    assert log(tight) == [commits[3]]


def test_no_object_of_another_fork_reaches_the_checkout(tmp_path: Path) -> None:
    """The project's store holds every fork's objects; fork A's checkout holds A's only."""
    repo_a, commits_a = linear(tmp_path / "a", 2)
    repo_b = new_repo(tmp_path / "b")
    git("pull", "-q", str(repo_a), "main", cwd=repo_b)  # B shares A's history, then diverges
    (repo_b / "secret.txt").write_text(SECRET)
    head_b = commit_all(repo_b, "B's secret")
    secret = git("rev-parse", f"{head_b}:secret.txt", cwd=repo_b)
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    store.create_canonical()
    in_store(store, repo_a)
    in_store(store, repo_b)
    assert store.create_fork("a") is None
    assert store.create_fork("b") is None
    assert store.update_fork_ref("a", "refs/heads/main", None, commits_a[1])
    assert store.update_fork_ref("b", "refs/heads/main", None, head_b)
    assert store.read_blob(secret) == SECRET.encode()  # the shared store has B's secret
    for export in ("dir", "tar"):
        out = tmp_path / f"export-{export}"
        if export == "dir":
            store.open_snapshot(commits_a[1]).export_to(out)
        else:
            link = store.publish_archive(commits_a[1])
            with tarfile.open(urlparse(link.url).path) as archive:
                archive.extractall(out, filter="tar")
        assert_exact_checkout(out, commits_a[1])
        for missing in (secret, head_b):
            assert "fatal" in git("cat-file", "-t", missing, cwd=out, check=False)
        packed = packed_objects(out)
        assert secret not in packed
        assert head_b not in packed
        raw = b"".join(path.read_bytes() for path in (out / ".git").rglob("*") if path.is_file())
        assert SECRET.encode() not in raw  # not even compressed data that inflates to it
        assert b"secret" not in raw


def test_a_read_only_checkout_still_answers_git(tmp_path: Path) -> None:
    """The check's lower layer is read-only: HEAD, log and status need no write. (Root
    ignores file modes, so the export is bind-mounted read-only in a mount namespace.)"""
    # Never skipped: CI runs as root with util-linux (make setup's system packages).
    assert os.geteuid() == 0, "needs root for a bind mount"
    assert shutil.which("unshare"), "needs unshare(1)"
    repo, commits = linear(tmp_path / "src", 3)
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    in_store(store, repo)
    out = tmp_path / "export"
    store.open_snapshot(commits[2]).export_to(out)
    before = {path: path.read_bytes() for path in (out / ".git").rglob("*") if path.is_file()}
    script = (
        'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && cd "$0"'
        " && git rev-parse HEAD && git status --porcelain && echo status-clean"
        " && git log --format=%H && ! touch .git/probe 2>/dev/null"
    )
    ran = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.split()
    assert lines == [commits[2], "status-clean", *commits[::-1]]
    after = {path: path.read_bytes() for path in (out / ".git").rglob("*") if path.is_file()}
    assert after == before


def test_the_archive_on_each_store_is_a_checkout(host: Any, tmp_path: Path) -> None:
    repo, commits = linear(tmp_path / "src", 3)
    store = host.store(PROJECT)
    store.create_canonical()
    import_objects(store, repo)
    link = store.publish_archive(commits[1])
    if link.url.startswith("file://"):
        data = Path(urlparse(link.url).path).read_bytes()
    else:
        key = f"archives/{commits[1]}.tar"
        data = store._s3.get_object(Bucket=store._bucket, Key=key)["Body"].read()
    out = tmp_path / "unpacked"
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        archive.extractall(out, filter="tar")
    assert_exact_checkout(out, commits[1])
    assert log(out) == commits[1::-1]


def packed_objects(checkout: Path) -> str:
    """Every object the checkout's only pack holds (`git show-index`)."""
    (index,) = (checkout / ".git" / "objects" / "pack").glob("pack-*.idx")
    with index.open("rb") as handle:
        listed = subprocess.run(
            ["git", "show-index"], stdin=handle, capture_output=True, text=True, check=True
        )
    return listed.stdout


def test_links_submodules_and_unicode_names_check_out_clean(tmp_path: Path) -> None:
    module = new_repo(tmp_path / "module")
    module_head = commit_all(module)
    repo = new_repo(tmp_path / "src")
    write_files(repo, {"unicode/名前.txt": "名前\n", "data/latin1.txt": "café".encode("latin-1")})
    os.symlink("/etc/passwd", repo / "link-outside")
    os.symlink("unicode", repo / "link-to-dir")
    git("add", "-A", cwd=repo)
    git("update-index", "--add", "--cacheinfo", f"160000,{module_head},vendor/module", cwd=repo)
    git("commit", "-q", "-m", "varied", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    in_store(store, repo)
    for export in ("dir", "tar"):
        out = tmp_path / f"export-{export}"
        if export == "dir":
            store.open_snapshot(commit).export_to(out)
        else:
            archive_bytes = io.BytesIO()
            store.open_snapshot(commit).export_tar(archive_bytes)
            with tarfile.open(fileobj=io.BytesIO(archive_bytes.getvalue())) as archive:
                archive.extractall(out, filter="fully_trusted")
        assert git("rev-parse", "HEAD", cwd=out) == commit
        assert git("status", "--porcelain", "--untracked-files=all", cwd=out) == ""
        assert git("ls-files", "-s", "vendor/module", cwd=out).startswith(f"160000 {module_head}")


def test_the_fargate_init_unpacking_gives_the_check_user_a_checkout(tmp_path: Path) -> None:
    """On AWS the init container runs `tar -x --no-same-owner` and `chown -R 1000:1000`
    (`fargate.INIT_COMMAND`), then the check runs as uid 1000: git must accept the
    checkout as that user (no `safe.directory` complaint) and find it clean."""
    # Never skipped: CI runs as root with util-linux (make setup's system packages).
    assert os.geteuid() == 0, "needs root to run git as the check's uid"
    assert shutil.which("setpriv"), "needs setpriv(1)"
    repo, commits = linear(tmp_path / "src", 3)
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    in_store(store, repo)
    link = store.publish_archive(commits[2])
    with tempfile.TemporaryDirectory(prefix="forkhorse-workspace-") as scratch:
        workspace = Path(scratch)
        workspace.chmod(0o755)  # /tmp/pytest-of-root is root-only; uid 1000 must reach it
        unpack_and_check_as_user(link.url, workspace, commits)


def unpack_and_check_as_user(url: str, workspace: Path, commits: list[str]) -> None:
    extract = ["tar", "-x", "--no-same-owner", "-f", urlparse(url).path, "-C"]
    subprocess.run([*extract, str(workspace)], check=True)
    subprocess.run(["chown", "-R", f"{CHECK_UID}:{CHECK_UID}", str(workspace)], check=True)
    script = (
        "git rev-parse HEAD && git status --porcelain && echo status-clean && git log --format=%H"
    )
    ran = subprocess.run(
        [*AS_CHECK_USER, "sh", "-c", script],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ["PATH"], "HOME": "/tmp", "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [commits[2], "status-clean", *commits[::-1]]
