"""GitStore conformance: the same behaviour from the disk and the S3/DynamoDB adapters."""

from __future__ import annotations

import io
import tarfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from forkhorse.adapters.git import s3 as s3_module
from forkhorse.adapters.git.store import DulwichGitStore, InvalidRefUpdate, RepoNotFound
from forkhorse.domain.git_access import CanonicalWriteCapability, mint_canonical_write_capability
from forkhorse.domain.run import RunRef
from forkhorse.domain.snapshot import SnapshotBudget, SnapshotUnavailable
from forkhorse.runner.workflow.steps import published_archive
from forkhorse.service.ancestry import GenerationAncestry

from tests.support.gitserve import (
    PROJECT,
    commit_all,
    git,
    import_as_canonical,
    import_objects,
    new_repo,
)

MISSING = "0123456789abcdef0123456789abcdef01234567"
ANCESTRY = GenerationAncestry()  # what the gate and promote ask (service/ancestry.py)


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """A linear history c0 <- c1 <- c2 plus eight sibling children of c2 on side branches."""
    repo = new_repo(tmp_path / "src")
    commits = []
    for index in range(3):
        (repo / "file.txt").write_text(f"version {index}\n")
        commits.append(commit_all(repo, f"c{index}"))
    for index in range(8):
        git("checkout", "-q", "-b", f"side{index}", commits[2], cwd=repo)
        (repo / "side.txt").write_text(f"side {index}\n")
        commits.append(commit_all(repo, f"side{index}"))
    return repo, commits


@pytest.fixture
def seeded(host: Any, history: tuple[Path, list[str]]) -> tuple[DulwichGitStore, list[str]]:
    repo, commits = history
    store = host.store(PROJECT)
    import_as_canonical(store, repo, commits[2])
    return store, commits


def test_a_fork_starts_at_the_canonical_head(seeded: tuple[DulwichGitStore, list[str]]) -> None:
    store, commits = seeded
    assert store.create_fork("f1") == commits[2]
    assert store.head("f1") == commits[2]
    assert store.refs("f1") == {"refs/heads/main": commits[2]}
    with pytest.raises(FileExistsError):
        store.create_fork("f1")


def test_exactly_one_concurrent_compare_and_set_wins(
    host: Any, seeded: tuple[DulwichGitStore, list[str]]
) -> None:
    store, commits = seeded
    store.create_fork("f1")
    candidates = commits[3:11]
    results: dict[str, bool] = {}
    barrier = threading.Barrier(len(candidates))

    def attempt(new: str) -> None:
        own_store = host.store(PROJECT)  # S3: one per request; disk: the one kept, shared
        barrier.wait()
        results[new] = own_store.update_fork_ref("f1", "refs/heads/main", commits[2], new)

    threads = [threading.Thread(target=attempt, args=(new,)) for new in candidates]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [new for new, won in results.items() if won]
    assert len(winners) == 1
    assert store.head("f1") == winners[0]


def test_a_stale_old_value_never_writes(seeded: tuple[DulwichGitStore, list[str]]) -> None:
    store, commits = seeded
    store.create_fork("f1")
    assert not store.update_fork_ref("f1", "refs/heads/main", commits[1], commits[3])
    assert not store.update_fork_ref("f1", "refs/heads/main", None, commits[3])
    assert store.head("f1") == commits[2]
    assert store.update_fork_ref("f1", "refs/heads/topic", None, commits[4])
    assert store.update_fork_ref("f1", "refs/heads/topic", commits[4], None)
    assert "refs/heads/topic" not in store.refs("f1")


def test_fast_forward_check(seeded: tuple[DulwichGitStore, list[str]]) -> None:
    store, commits = seeded
    assert ANCESTRY.is_ancestor(store, commits[0], commits[2])
    assert ANCESTRY.is_ancestor(store, commits[2], commits[2])
    assert not ANCESTRY.is_ancestor(store, commits[2], commits[0])
    assert ANCESTRY.is_ancestor(store, commits[2], commits[5])
    assert not ANCESTRY.is_ancestor(store, commits[4], commits[5])


def test_missing_objects_fail_closed(seeded: tuple[DulwichGitStore, list[str]]) -> None:
    store, commits = seeded
    store.create_fork("f1")
    with pytest.raises(SnapshotUnavailable):
        store.open_snapshot(MISSING)
    with pytest.raises(SnapshotUnavailable):
        store.read_commit(MISSING)
    with pytest.raises(SnapshotUnavailable):
        ANCESTRY.is_ancestor(store, MISSING, commits[2])
    with pytest.raises(SnapshotUnavailable):
        store.update_fork_ref("f1", "refs/heads/main", commits[2], MISSING)
    assert store.head("f1") == commits[2]
    with pytest.raises(SnapshotUnavailable):
        store.open_snapshot("not-a-sha")
    tree = store.read_commit(commits[2]).tree
    with pytest.raises(SnapshotUnavailable):
        store.open_snapshot(tree)  # a tree is not a commit


def test_a_commit_whose_parent_is_missing_fails_closed(host: Any, tmp_path: Path) -> None:
    full = new_repo(tmp_path / "full")
    (full / "a").write_text("1")
    first = commit_all(full)
    (full / "a").write_text("2")
    second = commit_all(full)
    shallow = tmp_path / "shallow"
    git("clone", "-q", "--depth", "1", f"file://{full}", str(shallow), cwd=tmp_path)
    store = host.store(PROJECT)
    import_as_canonical(store, shallow, second)
    assert ANCESTRY.is_ancestor(store, second, second)
    with pytest.raises(SnapshotUnavailable):
        ANCESTRY.is_ancestor(store, first, second)


def test_a_missing_blob_fails_closed_for_read_stat_and_list(host: Any, tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "src")
    (repo / "dir").mkdir()
    (repo / "dir" / "kept.txt").write_text("kept")
    (repo / "top.txt").write_text("top")
    commit = commit_all(repo)
    blob = git("rev-parse", f"{commit}:dir/kept.txt", cwd=repo)
    subtree = git("rev-parse", f"{commit}:dir", cwd=repo)
    store = host.store(PROJECT)
    store.create_canonical()
    from dulwich.repo import Repo

    with Repo(str(repo)) as source:
        kept = [
            (source.object_store[sha], None)
            for sha in source.object_store
            if sha.decode() not in (blob, subtree)
        ]
    store.objects.add_objects(kept)
    reader = store.open_snapshot(commit).reader(SnapshotBudget())
    assert reader.read("top.txt") == "top"
    for call in (lambda: reader.read("dir/kept.txt"), lambda: reader.stat("dir/kept.txt")):
        with pytest.raises(SnapshotUnavailable):
            call()
    with pytest.raises(SnapshotUnavailable):
        reader.list("")
    with pytest.raises(SnapshotUnavailable):
        store.read_blob(blob)


def test_canonical_is_written_only_with_the_promote_capability(
    seeded: tuple[DulwichGitStore, list[str]],
) -> None:
    store, commits = seeded
    with pytest.raises(TypeError):
        CanonicalWriteCapability(PROJECT, object())
    with pytest.raises(PermissionError):
        store.update_canonical_ref(object(), "refs/heads/main", commits[2], commits[3])  # type: ignore[arg-type]
    other = mint_canonical_write_capability("another")
    with pytest.raises(PermissionError):
        store.update_canonical_ref(other, "refs/heads/main", commits[2], commits[3])
    assert store.head() == commits[2]
    capability = mint_canonical_write_capability(PROJECT)
    assert store.update_canonical_ref(capability, "refs/heads/main", commits[2], commits[3])
    assert not store.update_canonical_ref(capability, "refs/heads/main", commits[2], commits[4])
    assert store.head() == commits[3]


def test_ref_names_and_unknown_repositories_are_refused(
    seeded: tuple[DulwichGitStore, list[str]],
) -> None:
    store, commits = seeded
    store.create_fork("f1")
    for bad in ("HEAD", "refs/heads/../x", "refs/other/x", "refs/heads/a..b", "main"):
        with pytest.raises(InvalidRefUpdate):
            store.update_fork_ref("f1", bad, None, commits[3])
    with pytest.raises(RepoNotFound):
        store.update_fork_ref("nope", "refs/heads/main", None, commits[3])
    with pytest.raises(RepoNotFound):
        store.head("../canonical")


def test_exact_sha_reads_ignore_branch_refs(seeded: tuple[DulwichGitStore, list[str]]) -> None:
    store, commits = seeded
    old = store.open_snapshot(commits[0]).reader(SnapshotBudget())
    assert old.read("file.txt") == "version 0\n"
    assert old.commit == commits[0]
    info = store.read_commit(commits[1])
    assert info.parents == (commits[0],)
    names = [entry.name for entry in store.read_tree(info.tree)]
    assert names == [b"file.txt"]


def test_the_archive_holds_the_exact_tree(
    host: Any, seeded: tuple[DulwichGitStore, list[str]]
) -> None:
    store, commits = seeded
    link = store.publish_archive(commits[3])
    snapshot = store.open_snapshot(commits[3])
    assert link.tree == snapshot.tree
    assert link.expires_in_seconds == 180
    if link.url.startswith("file://"):
        data = Path(urlparse(link.url).path).read_bytes()
    else:
        query = parse_qs(urlparse(link.url).query)
        assert query["X-Amz-Expires"] == ["180"]
        assert urlparse(link.url).path.endswith(f"/archives/{snapshot.commit}.tar")
        s3 = store._s3  # type: ignore[attr-defined]
        key = f"archives/{snapshot.commit}.tar"
        data = s3.get_object(Bucket=store._bucket, Key=key)["Body"].read()  # type: ignore[attr-defined]
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = {member.name: archive.extractfile(member) for member in archive.getmembers()}
        contents = {name: handle.read() for name, handle in members.items() if handle}
    tree = {name: data for name, data in contents.items() if not name.startswith(".git/")}
    assert tree == {"file.txt": b"version 2\n", "side.txt": b"side 0\n"}
    assert contents[".git/HEAD"] == f"{commits[3]}\n".encode()  # the exact commit, detached


def test_a_full_checks_archive_is_published_from_the_runs_project(
    host: Any, seeded: tuple[DulwichGitStore, list[str]]
) -> None:
    """Fargate's checkout source finds the store by the run, not by the snapshot (which
    names no project: it once read one by getattr and could only raise)."""
    store, commits = seeded
    run = RunRef(
        project_id=PROJECT,
        review_id="review-1",
        generation="generation-1",
        trigger="review-created",
        commit=commits[3],
    )
    snapshot = store.open_snapshot(commits[3])
    link = published_archive(host)(run, snapshot, time.monotonic() + 60)
    assert link.tree == snapshot.tree


def test_an_s3_archive_is_reused_only_while_young(
    s3_host: Any, history: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bucket expires archives after a day: one near that age is written again rather
    than linked, so its link never outlives it."""
    repo, commits = history
    store = s3_host.store(PROJECT)
    import_as_canonical(store, repo, commits[2])
    key = f"archives/{commits[2]}.tar"
    store.publish_archive(commits[2])
    written = store._s3.head_object(Bucket=store._bucket, Key=key)["ETag"]
    uploads: list[str] = []
    upload = store._s3.upload_fileobj

    def counted(fileobj: Any, bucket: str, key: str, **kwargs: Any) -> None:
        uploads.append(key)
        upload(fileobj, bucket, key, **kwargs)

    monkeypatch.setattr(store._s3, "upload_fileobj", counted)
    store.publish_archive(commits[2])
    assert uploads == []  # young: linked as it is
    monkeypatch.setattr(s3_module, "ARCHIVE_REUSE_SECONDS", 0)
    store.publish_archive(commits[2])
    assert uploads == [key]  # old: written again (its age starts over)
    assert store._s3.head_object(Bucket=store._bucket, Key=key)["ETag"] == written


def test_objects_imported_twice_are_harmless(host: Any, history: tuple[Path, list[str]]) -> None:
    repo, commits = history
    store = host.store(PROJECT)
    import_as_canonical(store, repo, commits[0])
    import_objects(store, repo)
    assert host.store(PROJECT).open_snapshot(commits[2]).reader(SnapshotBudget()).list("") == [
        "file.txt"
    ]
