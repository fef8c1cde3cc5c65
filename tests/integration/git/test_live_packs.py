"""A live local server's git resources under many pushes, with the real git CLI: each
request closes the packs it opened (open files settle back, even with the cyclic garbage
collector off), and a push that leaves a project past `GitLimits.packs_per_project` packs
starts one background consolidation that brings the count back while every ref, every
review's commit and every young unreachable object stays readable."""

from __future__ import annotations

import gc
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.domain.limits import GIT

from tests.support.live import Lane, Project, Server, new_lane, new_project, start_server
from tests.support.resources import open_fds

FD_ROUNDS = 10
FD_SLACK = 6  # sockets waitress has not closed yet, SQLite journals, a log file
SETTLE_SECONDS = 30.0
PUSHES = 63
LANES = 3
CONSOLIDATE_SECONDS = 300.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("forkhorse")
    live, stop = start_server(home / "home", ImageRegistry(home / "images"))
    yield live
    stop()


def _repo_dir(project: Project) -> Path:
    return project.server.home / "git" / project.id


def _packs(project: Project) -> int:
    return len(list((_repo_dir(project) / "objects" / "pack").glob("*.pack")))


def _settled_fds(ceiling: int) -> int:
    """This process's open files once they are at most `ceiling`, or after the wait."""
    deadline = time.monotonic() + SETTLE_SECONDS
    count = open_fds(os.getpid())
    while count > ceiling and time.monotonic() < deadline:
        time.sleep(0.2)
        count = open_fds(os.getpid())
    return count


def _stored(project: Project, sha: str) -> bool:
    done = subprocess.run(
        ["git", "cat-file", "-e", sha],
        cwd=_repo_dir(project) / "canonical.git",
        capture_output=True,
        check=False,
        timeout=60,
    )
    return done.returncode == 0


def _fetch_everything(lane: Lane, into: Path) -> None:
    """A fresh clone of the lane's fork, then a fetch of canonical into it."""
    assert lane.agent.token is not None
    lane.tree.git(lane.agent.token, "clone", "-q", lane.fork["cloneUrl"], str(into))
    lane.tree.git(lane.agent.token, "-C", str(into), "fetch", "-q", lane.project.canonical_url)


def test_git_requests_close_their_packs(server: Server) -> None:
    """Pushes, clones, fetches and reviews (whose runs read the commit) with the cyclic
    collector off: without each request closing its object store, every index it opened
    would stay open."""
    lane = new_lane(new_project(server, False))
    warm = lane.request_review(lane.push({"warm.txt": "warm\n"}))
    server.owner.wait_receipt(lane.project.id, warm["id"])
    _fetch_everything(lane, server.workdir / "warm-clone")
    gc.collect()
    baseline = open_fds(os.getpid())
    gc.disable()
    try:
        for index in range(FD_ROUNDS):
            review = lane.request_review(lane.push({f"f{index}.txt": f"{index}\n"}))
            _fetch_everything(lane, server.workdir / f"fd-clone-{index}")
            server.owner.wait_receipt(lane.project.id, review["id"])  # the run read it
        settled = _settled_fds(baseline + FD_SLACK)
    finally:
        gc.enable()
    assert settled <= baseline + FD_SLACK, f"{settled} open files after, {baseline} before"


def _force_away(lane: Lane, index: int) -> str:
    """Push a commit, then force-push its parent's other child: the first is unreachable."""
    lost = lane.push({f"lost-{index}.txt": f"lost {index}\n"})
    assert lane.agent.token is not None
    lane.tree.git(None, "reset", "-q", "--hard", "HEAD~1")
    lane.tree.commit({f"kept-{index}.txt": f"kept {index}\n"}, "over it")
    lane.tree.push(lane.fork["cloneUrl"], lane.agent.token, force=True)
    return lost


def _consolidations(project: Project) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"consolidate-{project.id}"]


def test_many_pushes_keep_a_project_under_its_pack_limit(server: Server) -> None:
    project = new_project(server, False)
    lanes = [new_lane(project, f"agent-{n}") for n in range(LANES)]
    reviewed: list[str] = []
    lost: list[str] = []
    gc.collect()
    fds_before, packs_before = open_fds(os.getpid()), _packs(project)
    peak_packs, peak_fds, pushes = packs_before, fds_before, 0
    for index in range(PUSHES):
        lane = lanes[index % LANES]
        if index % 20 == 7:
            lost.append(_force_away(lane, index))
            pushes += 1
        else:
            commit = lane.push({f"n{index}.txt": f"{index}\n"})
            if index % 20 == 3:
                lane.request_review(commit)
                reviewed.append(commit)
                lost.append(_force_away(lane, index))  # the review's commit is left behind
                pushes += 2
        pushes += 1
        peak_packs = max(peak_packs, _packs(project))
        peak_fds = max(peak_fds, open_fds(os.getpid()))
    deadline = time.monotonic() + CONSOLIDATE_SECONDS
    while _consolidations(project) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _consolidations(project), "the consolidation must finish"
    packs_after = _packs(project)
    fds_after = _settled_fds(fds_before + FD_SLACK)
    print(  # the figures for the report (pytest -s)
        f"\n{pushes} pushes; packs: before {packs_before}, peak {peak_packs}, after {packs_after};"
        f" open files: before {fds_before}, peak {peak_fds}, after {fds_after}"
    )

    assert packs_after <= GIT.packs_per_project
    # Pushes go on while a consolidation runs: the pushes of one consolidation's length past
    # the limit, where nothing would bound them otherwise (one pack per push).
    assert peak_packs < 2 * GIT.packs_per_project < pushes
    for sha in [*reviewed, *lost]:
        assert _stored(project, sha), f"{sha}: a review's or a young unreachable commit"
    for n, lane in enumerate(lanes):
        clone = server.workdir / f"after-{n}"
        _fetch_everything(lane, clone)
        lane.tree.git(None, "-C", str(clone), "fsck", "--full", "--strict")
        head = lane.tree.git(None, "rev-parse", "HEAD")
        assert lane.tree.git(None, "-C", str(clone), "rev-parse", "HEAD") == head
    assert fds_after <= fds_before + FD_SLACK
