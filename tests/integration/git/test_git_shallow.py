"""Shallow clones with the real git CLI (issue 29): push from one, deepen it, unshallow it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.gitserve import Served, commit_all, git, new_repo

DEPTH = 6


@pytest.fixture
def history(served: Served, tmp_path: Path) -> tuple[Served, list[str]]:
    """Canonical with six commits, one a day (so --shallow-since has dates to cut at)."""
    source = new_repo(tmp_path / "owner")
    shas = []
    for day in range(DEPTH):
        (source / f"f{day}.txt").write_text(f"{day}\n")
        git("add", "-A", cwd=source)
        dated_commit(source, f"day {day}", f"2026-10-{day + 1:02d}T12:00:00Z")
        shas.append(git("rev-parse", "HEAD", cwd=source))
    output = git("push", served.remote("owner-token"), "main", cwd=source, check=False)
    assert served.store.head() == shas[-1], output
    served.store.create_fork("fa")
    return served, shas


def dated_commit(repo: Path, message: str, date: str) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Tester",
        "GIT_AUTHOR_EMAIL": "tester@example.com",
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.com",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, env=env, check=True)


def shallow_clone(served: Served, tmp_path: Path, *args: str) -> Path:
    work = tmp_path / "shallow"
    git("clone", "-q", *args, served.remote("agent-a-token"), str(work), cwd=tmp_path)
    return work


def depth(work: Path) -> int:
    return int(git("rev-list", "--count", "origin/main", cwd=work))


def test_a_push_from_a_depth_1_clone_is_accepted(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, shas = history
    work = shallow_clone(served, tmp_path, "--depth", "1")
    assert depth(work) == 1
    (work / "new.txt").write_text("new\n")
    new = commit_all(work, "from a shallow clone")
    output = git("push", served.remote("agent-a-token", "fa"), "main", cwd=work, check=False)
    assert served.store.head("fa") == new, output
    assert served.store.head() == shas[-1]


def test_deepen_relative_since_and_unshallow_follow_git(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, _ = history
    work = shallow_clone(served, tmp_path, "--depth", "2")
    assert depth(work) == 2
    git("fetch", "-q", "--deepen=1", "origin", cwd=work)
    assert depth(work) == 3
    git("fetch", "-q", "--deepen=2", "origin", cwd=work)
    assert depth(work) == 5
    git("fetch", "-q", "--unshallow", "origin", cwd=work)
    assert depth(work) == DEPTH
    assert not (work / ".git" / "shallow").exists()
    assert git("fsck", "--no-progress", cwd=work) == ""


def test_shallow_since_cuts_history_at_a_date(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, shas = history
    work = shallow_clone(served, tmp_path, "--shallow-since=2026-10-04T00:00:00Z")
    assert depth(work) == 3  # days 3, 4 and 5
    assert (work / ".git" / "shallow").read_text().split() == [shas[3]]
    git("fetch", "-q", "--shallow-since=2026-10-02T00:00:00Z", "origin", cwd=work)
    assert depth(work) == 5
    git("fetch", "-q", "--unshallow", "origin", cwd=work)
    assert depth(work) == DEPTH


@pytest.mark.parametrize("version", ["0", "2"])
def test_a_plain_fetch_and_pull_from_a_shallow_clone_work(
    history: tuple[Served, list[str]], tmp_path: Path, version: str
) -> None:
    served, _ = history
    v = ("-c", f"protocol.version={version}")
    work = shallow_clone(served, tmp_path, "--depth", "1")
    source = tmp_path / "owner"
    (source / "later.txt").write_text("later\n")
    later = commit_all(source, "later")
    # canonical takes no push after its import; a fork the agent pushes to moves instead
    output = git("push", served.remote("agent-a-token", "fa"), "main", cwd=source, check=False)
    assert served.store.head("fa") == later, output
    git("remote", "set-url", "origin", served.remote("agent-a-token", "fa"), cwd=work)
    git(*v, "pull", "-q", "--ff-only", "origin", "main", cwd=work)
    assert git("rev-parse", "HEAD", cwd=work) == later
    assert depth(work) == 2
    assert (work / ".git" / "shallow").exists()


def test_a_deepen_walk_is_bounded(history: tuple[Served, list[str]], tmp_path: Path) -> None:
    """Past the walk's budget the commits reached become the boundary: a shallower answer."""
    from dulwich.objects import ObjectID
    from forkhorse.githttp.shallow import INFINITE_DEPTH, ShallowSection

    served, shas = history
    section = ShallowSection(object(), relative=lambda: False, limit=3)
    objects = served.store.objects
    tip = ObjectID(shas[-1].encode())
    shallow, deep = section.boundary(objects, [tip], depth=INFINITE_DEPTH, since=None)
    assert section.read_commits == 3
    assert deep == {sha.encode() for sha in shas[-3:]}
    assert shallow == {shas[-4].encode()}


def test_shallow_exclude_stops_at_a_ref(history: tuple[Served, list[str]], tmp_path: Path) -> None:
    served, shas = history
    source = tmp_path / "owner"
    git("push", served.remote("agent-a-token", "fa"), f"{shas[2]}:refs/tags/old", cwd=source)
    git("push", served.remote("agent-a-token", "fa"), "main", cwd=source)
    remote = served.remote("agent-a-token", "fa")
    for version in ("0", "2"):
        work = tmp_path / f"excluded-v{version}"
        v = ("-c", f"protocol.version={version}")
        git(*v, "clone", "-q", "--shallow-exclude=old", remote, str(work), cwd=tmp_path)
        assert depth(work) == DEPTH - 3  # days 3, 4 and 5
        assert (work / ".git" / "shallow").read_text().split() == [shas[3]]
        refused = git(*v, "fetch", "--shallow-exclude=nope", "origin", cwd=work, check=False)
        assert "ambiguous deepen-not: nope" in refused, refused
