"""The snapshot reader over repositories made with real git, on the disk adapter."""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
import threading
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit, Tree
from forkhorse.adapters.git.disk import DiskGitHost, DiskGitStore
from forkhorse.adapters.git.probe import probe_object
from forkhorse.adapters.git.snapshot import DulwichSnapshot
from forkhorse.domain.snapshot import (
    BudgetExceeded,
    CapabilityRevoked,
    MalformedText,
    PathRejected,
    SnapshotBudget,
    SnapshotUnavailable,
)

from tests.support.gitserve import PROJECT, commit_all, git, new_repo, write_files

MiB = 1024 * 1024
DEEP_64 = "/".join(f"d{level}" for level in range(63)) + "/leaf.txt"
DEEP_65 = "/".join(f"e{level}" for level in range(64)) + "/too-deep.txt"


def stored(tmp_path: Path, source: Path) -> tuple[DiskGitStore, str]:
    """Push a real git repository into a fresh disk store's canonical; return its head."""
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    store.create_canonical()
    git("push", "-q", str(store.repo_path(None)), "HEAD:refs/heads/main", cwd=source)
    head = store.head()
    assert head is not None
    return store, head


@pytest.fixture
def varied(tmp_path: Path) -> tuple[DiskGitStore, str, Path]:
    """Symlinks, a submodule, executable, binary and non-UTF-8 files and a deep path."""
    module = new_repo(tmp_path / "module")
    (module / "inside.txt").write_text("inside\n")
    module_head = commit_all(module)
    repo = new_repo(tmp_path / "varied")
    write_files(
        repo,
        {
            "README.md": "hello\n",
            "src/main.py": "print('hi')\n",
            "src/lib/util.py": "X = 1\n",
            "srcfile.txt": "not under src/\n",
            "bin/run.sh": "#!/bin/sh\necho run\n",
            "data/blob.bin": b"\x89PNG\r\n\x1a\n\x00\x00binary",
            "data/late-nul.bin": b"a" * 8192 + b"\x00",
            "data/latin1.txt": "café".encode("latin-1"),
            "unicode/名前.txt": "名前\n",
            DEEP_64: "deep\n",
        },
    )
    (repo / "bin" / "run.sh").chmod(0o755)
    os.symlink("README.md", repo / "link-to-file")
    os.symlink("src", repo / "link-to-dir")
    os.symlink("/etc/passwd", repo / "link-outside")
    git("add", "-A", cwd=repo)
    git("update-index", "--add", "--cacheinfo", f"160000,{module_head},vendor/module", cwd=repo)
    git("commit", "-q", "-m", "varied", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    store, head = stored(tmp_path, repo)
    assert head == commit
    return store, commit, repo


def reader_for(store: DiskGitStore, commit: str, **limits: int):  # type: ignore[no-untyped-def]
    return store.open_snapshot(commit).reader(SnapshotBudget(**limits))


def test_read_stat_and_list_follow_the_spec(varied: tuple[DiskGitStore, str, Path]) -> None:
    store, commit, _ = varied
    reader = reader_for(store, commit)
    assert reader.commit == commit
    assert reader.read("README.md") == "hello\n"
    assert reader.read("unicode/名前.txt") == "名前\n"
    assert reader.read("bin/run.sh") == "#!/bin/sh\necho run\n"  # executable is regular
    assert reader.read(DEEP_64) == "deep\n"
    assert reader.stat("README.md") == {"size": 6, "binary": False}
    assert reader.stat("data/blob.bin") == {"size": 16, "binary": True}
    assert reader.stat("data/late-nul.bin") == {"size": 8193, "binary": False}  # NUL past 8 KiB
    assert reader.stat("data/latin1.txt") == {"size": 4, "binary": False}
    with pytest.raises(MalformedText):
        reader.read("data/latin1.txt")
    assert reader.list("src/") == ["src/lib/util.py", "src/main.py"]
    assert reader.list("src") == ["src/lib/util.py", "src/main.py", "srcfile.txt"]
    assert reader.list("bin/") == ["bin/run.sh"]
    assert reader.list("nothing/") == []


def test_absent_dirs_symlinks_and_submodules_are_none(
    varied: tuple[DiskGitStore, str, Path],
) -> None:
    store, commit, _ = varied
    reader = reader_for(store, commit)
    for path in (
        "missing.txt",
        "src",
        "link-to-file",
        "link-to-dir",
        "link-to-dir/main.py",
        "link-outside",
        "vendor/module",
        "vendor/module/inside.txt",
        "README.md/child",
    ):
        assert reader.read(path) is None, path
        assert reader.stat(path) is None, path
    listed = reader.list("")
    assert listed == sorted(listed)
    assert not any(path.startswith(("link", "vendor")) for path in listed)
    assert "bin/run.sh" in listed
    assert DEEP_64 in listed


def test_rejected_paths_deliver_nothing(varied: tuple[DiskGitStore, str, Path]) -> None:
    store, commit, _ = varied
    reader = reader_for(store, commit)
    for path in (
        "/README.md",
        "../README.md",
        "src//main.py",
        "src\\main.py",
        ".git/HEAD",
        "a\x00",
        DEEP_65,
    ):
        with pytest.raises(PathRejected):
            reader.read(path)
        with pytest.raises(PathRejected):
            reader.stat(path)


def test_paths_deeper_than_64_levels_stop_a_listing(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "deep")
    write_files(repo, {DEEP_65: "x", "top.txt": "top"})
    commit_all(repo)
    store, commit = stored(tmp_path, repo)
    reader = reader_for(store, commit)
    assert reader.list("top") == ["top.txt"]
    with pytest.raises(BudgetExceeded):
        reader.list("")
    with pytest.raises(PathRejected):
        reader.read(DEEP_65)
    exported = tmp_path / "out"
    store.open_snapshot(commit).export_to(exported)  # full checks still get the exact tree
    assert (exported / DEEP_65).read_text() == "x"


def test_the_directory_export_is_the_exact_tree(
    varied: tuple[DiskGitStore, str, Path], tmp_path: Path
) -> None:
    store, commit, repo = varied
    out = tmp_path / "export"
    store.open_snapshot(commit).export_to(out)
    assert os.readlink(out / "link-to-dir") == "src"
    assert os.readlink(out / "link-outside") == "/etc/passwd"
    assert (out / "vendor" / "module").is_dir()
    assert not any((out / "vendor" / "module").iterdir())
    assert os.stat(out / "bin" / "run.sh").st_mode & 0o777 == 0o755
    assert os.stat(out / "README.md").st_mode & 0o777 == 0o644
    assert (out / "data" / "latin1.txt").read_bytes() == "café".encode("latin-1")
    exported = sorted(
        str(path.relative_to(out))
        for path in out.rglob("*")
        if (path.is_file() or path.is_symlink()) and path.relative_to(out).parts[0] != ".git"
    )
    tracked = git("ls-tree", "-r", "-z", "--name-only", commit, cwd=repo).split("\0")
    assert exported == sorted(path for path in tracked if path and path != "vendor/module")
    with pytest.raises(FileExistsError):
        store.open_snapshot(commit).export_to(out)


def test_the_tar_export_matches_the_tree(varied: tuple[DiskGitStore, str, Path]) -> None:
    store, commit, _ = varied
    first, second = io.BytesIO(), io.BytesIO()
    store.open_snapshot(commit).export_tar(first)
    store.open_snapshot(commit).export_tar(second)
    assert first.getvalue() == second.getvalue()  # deterministic, so it can live under its SHA
    with tarfile.open(fileobj=io.BytesIO(first.getvalue())) as archive:
        members = {member.name: member for member in archive.getmembers()}
        assert members["link-to-dir"].issym()
        assert members["link-to-dir"].linkname == "src"
        assert members["bin/run.sh"].mode == 0o755
        assert members["vendor/module"].isdir()
        handle = archive.extractfile(members["data/blob.bin"])
        assert handle is not None
        assert handle.read() == b"\x89PNG\r\n\x1a\n\x00\x00binary"


def test_ten_thousand_files(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "many")
    for directory in range(100):
        folder = repo / f"d{directory:02d}"
        folder.mkdir()
        for index in range(100):
            (folder / f"f{index:02d}.txt").write_text(f"{directory}-{index}\n")
    store, commit = stored(tmp_path, commit_all(repo) and repo)
    snapshot = store.open_snapshot(commit)
    assert len(snapshot.list_files()) == 10_000
    reader = snapshot.reader(SnapshotBudget())
    assert reader.list("d42/") == [f"d42/f{index:02d}.txt" for index in range(100)]
    assert reader.read("d99/f99.txt") == "99-99\n"
    with pytest.raises(BudgetExceeded):
        reader.list("")  # 10,000 paths is past the 2,000-path budget; nothing is delivered
    out = tmp_path / "export"
    snapshot.export_to(out)
    assert sum(1 for _ in out.rglob("*.txt")) == 10_000


def test_byte_budget_at_the_limit_and_one_past(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "bytes")
    write_files(
        repo, {"big.txt": "a" * (2 * MiB - 1), "one.txt": "b", "huge.txt": "c" * (2 * MiB + 1)}
    )
    store, commit = stored(tmp_path, commit_all(repo) and repo)
    reader = reader_for(store, commit)
    assert len(reader.read("big.txt") or "") == 2 * MiB - 1
    assert reader.read("one.txt") == "b"  # exactly 2 MiB now
    with pytest.raises(BudgetExceeded):
        reader.stat("one.txt")  # a 1-byte sample is one past
    fresh = reader_for(store, commit)
    with pytest.raises(BudgetExceeded):
        fresh.read("huge.txt")
    assert fresh.stat("huge.txt") == {"size": 2 * MiB + 1, "binary": False}  # 8 KiB sample only


def test_listed_path_budget_at_the_limit_and_one_past(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "paths")
    write_files(repo, {f"many/f{index:04d}": "" for index in range(2_000)})
    store, commit = stored(tmp_path, commit_all(repo) and repo)
    reader = reader_for(store, commit)
    assert len(reader.list("many/")) == 2_000
    with pytest.raises(BudgetExceeded):
        reader.list("many/f0000")  # repeated listings count again


def test_operation_budget_at_the_limit_and_one_past(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "ops")
    write_files(repo, {"a.txt": "a", "b.txt": "b", "c.txt": "c"})
    store, commit = stored(tmp_path, commit_all(repo) and repo)
    budget = SnapshotBudget()
    reader = store.open_snapshot(commit).reader(budget)
    assert reader.read("a.txt") == "a"
    assert budget.used_operations == 1 + 3  # one file call plus the root's three entries
    for _ in range(10_000 - 4):
        assert reader.stat("missing") is None
    assert budget.used_operations == 10_000
    with pytest.raises(BudgetExceeded):
        reader.read("a.txt")


def test_concurrent_reads_cannot_overrun_the_byte_budget(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "race")
    write_files(repo, {"k.txt": "k" * 1_000})
    store, commit = stored(tmp_path, commit_all(repo) and repo)
    budget = SnapshotBudget(max_bytes=10_000)
    reader = store.open_snapshot(commit).reader(budget)
    delivered: list[str] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(5):
            with contextlib.suppress(BudgetExceeded):
                delivered.append(reader.read("k.txt") or "")

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(delivered) == 10
    assert budget.used_bytes == 10_000


def test_revocation_stops_later_and_pending_calls(
    varied: tuple[DiskGitStore, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, commit, _ = varied
    budget = SnapshotBudget()
    snapshot = store.open_snapshot(commit)
    reader = snapshot.reader(budget)
    original = DulwichSnapshot.blob_bytes

    def revoke_while_pending(self: DulwichSnapshot, sha: str) -> bytes:
        data = original(self, sha)
        budget.revoke()  # the deadline fires while the blob is being materialized
        return data

    monkeypatch.setattr(DulwichSnapshot, "blob_bytes", revoke_while_pending)
    with pytest.raises(CapabilityRevoked):
        reader.read("README.md")
    for call in (lambda: reader.list(""), lambda: reader.stat("README.md")):
        with pytest.raises(CapabilityRevoked):
            call()


def test_tree_metadata_is_cached_per_snapshot(
    varied: tuple[DiskGitStore, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, commit, _ = varied
    snapshot = store.open_snapshot(commit)
    assert store.open_snapshot(commit) is snapshot
    snapshot.reader(SnapshotBudget()).list("")
    parsed: list[str] = []
    original = DulwichSnapshot._parse_tree

    def counting(self: DulwichSnapshot, sha: str) -> Tree:
        parsed.append(sha)
        return original(self, sha)

    monkeypatch.setattr(DulwichSnapshot, "_parse_tree", counting)
    second = snapshot.reader(SnapshotBudget())
    assert second.list("") == snapshot.reader(SnapshotBudget()).list("")
    assert second.read("src/lib/util.py") == "X = 1\n"
    assert parsed == []


def _commit_with_tree(store: DiskGitStore, tree: Tree, extra: list[Blob]) -> str:
    commit = Commit()
    commit.tree = tree.id
    commit.author = commit.committer = b"T <t@example.com>"
    commit.author_time = commit.commit_time = 0
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"hostile"
    store.objects.add_objects([(obj, None) for obj in [*extra, tree, commit]])
    return commit.id.decode()


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        (b".git", 0o100644),
        (b".GIT", 0o040000),
        (b"..", 0o100644),
        (b"a\\b", 0o100644),
        (b"a\x01b", 0o100644),
        (b"caf\xe9", 0o100644),
        (b"ok.txt", 0o100600),
    ],
)
def test_unsafe_trees_fail_closed(tmp_path: Path, name: bytes, mode: int) -> None:
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    blob = Blob.from_string(b"payload")
    tree = Tree()
    tree.add(b"fine.txt", 0o100644, blob.id)
    tree.add(name, mode, blob.id)
    commit = _commit_with_tree(store, tree, [blob])
    reader = store.open_snapshot(commit).reader(SnapshotBudget())
    for call in (
        lambda: reader.read("fine.txt"),
        lambda: reader.stat("fine.txt"),
        lambda: reader.list(""),
    ):
        with pytest.raises(SnapshotUnavailable):
            call()


def test_a_file_entry_that_names_a_tree_fails_closed(tmp_path: Path) -> None:
    store = DiskGitHost(tmp_path / "state").store(PROJECT)
    inner = Tree()
    tree = Tree()
    tree.add(b"looks-like-a-file", 0o100644, inner.id)
    commit = _commit_with_tree(store, tree, [inner])  # type: ignore[list-item]
    reader = store.open_snapshot(commit).reader(SnapshotBudget())
    with pytest.raises(SnapshotUnavailable):
        reader.read("looks-like-a-file")
    with pytest.raises(SnapshotUnavailable):
        reader.stat("looks-like-a-file")


def test_stat_on_delta_objects_reports_the_whole_blob(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "delta")
    body = "".join(f"line {index} of a long text file\n" for index in range(20_000))
    (repo / "text.txt").write_text(body)
    commit_all(repo, "v1")
    (repo / "text.txt").write_text(body + "one more line\n")
    head = commit_all(repo, "v2")
    store, commit = stored(tmp_path, repo)
    git("repack", "-adfq", "--depth=50", "--window=50", cwd=store.repo_path(None))
    fresh = DiskGitHost(tmp_path / "state").store(PROJECT)
    shas = [git("rev-parse", f"{revision}:text.txt", cwd=repo) for revision in (f"{head}~1", head)]
    probes = [probe_object(fresh.objects, sha, 8192) for sha in shas]
    assert any(probe.prefix is None for probe in probes), "expected one delta object"
    assert all(probe.type_num == 3 for probe in probes)
    reader = fresh.open_snapshot(f"{head}~1" and commit).reader(SnapshotBudget())
    assert reader.stat("text.txt") == {"size": len(body) + 14, "binary": False}
    old = fresh.open_snapshot(git("rev-parse", f"{head}~1", cwd=repo)).reader(SnapshotBudget())
    assert old.stat("text.txt") == {"size": len(body), "binary": False}
    assert old.read("text.txt") == body
