"""Shallow clones with the real git CLI (issue 29): push from one, deepen it, unshallow it."""

from __future__ import annotations

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
        date = f"2026-10-{day + 1:02d}T12:00:00Z"
        git("-c", "user.name=T", "commit", "-q", "-m", f"day {day}", f"--date={date}", cwd=source)
        shas.append(git("rev-parse", "HEAD", cwd=source))
    output = git("push", served.remote("owner-token"), "main", cwd=source, check=False)
    assert served.store.head() == shas[-1], output
    served.store.create_fork("fa")
    return served, shas


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
