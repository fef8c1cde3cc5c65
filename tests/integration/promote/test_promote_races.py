"""Promotes racing each other, and a promote racing a push to the fork, on a live local
server (waitress, SQLite, disk git over smart HTTP, real bubblewrap and podman checks).

Every race is held open by a full check that blocks until the test releases it: the check
marks its /workspace (whose writes land in the overlay's upper directory, on a host tmpfs the
test can see) and waits for a release file, which the test creates through `podman exec` so
the container's overlay sees it.
So the order is the test's, not the clock's: a promote's before-promote run is known to be
running while its rival asks, or while the agent pushes."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from forkhorse.adapters.containers.podman import RUNS_DIR

from tests.integration.api.support import POLL_SECONDS, RECEIPT_TIMEOUT, checks_files
from tests.support.live import Lane, Project, Server, new_lane

ALREADY_RUNNING = {"error": "A promote of this review is already running."}
WAITING, RELEASE = ".waiting", ".release"
RELEASE_ATTEMPTS = 10
# The full check marks its workspace, then waits until the test releases it.
GATED = checks_files(
    f"touch /workspace/{WAITING}; while [ ! -e /workspace/{RELEASE} ]; do sleep 0.1; done"
)


class Gate:
    """Releases blocked full checks one at a time, each once it is seen waiting."""

    def __init__(self, server: Server) -> None:
        self._runs = server.workdir.parent / RUNS_DIR
        self._released: set[Path] = set()

    def release(self, marker: Path | None = None) -> None:
        """Let the given waiting check (or the next one seen waiting) finish. The check ends
        within 0.1 s of the release file, and `podman run --rm` then removes its container,
        which can cut `podman exec` short with an error after the file was made: a container
        no longer running counts as released. A loaded host can refuse an exec outright, so
        it is tried again while the container runs."""
        found = marker or self.waiting()
        container = found.parents[2].name  # runs/<container>/workspace/upper/<marker>
        failure = ""
        for _ in range(RELEASE_ATTEMPTS):
            released = subprocess.run(
                ["podman", "exec", container, "touch", f"/workspace/{RELEASE}"],
                capture_output=True,
                timeout=60,
                check=False,
            )
            if released.returncode == 0 or not _running(container):
                self._released.add(found)
                return
            failure = f"exit {released.returncode}, {released.stderr.decode()}"
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"{container} could not be released: {failure}")

    def waiting(self) -> Path:
        """The marker of a blocked check not yet released, once there is one."""
        deadline = time.monotonic() + RECEIPT_TIMEOUT
        while time.monotonic() < deadline:
            found = set(self._runs.glob(f"*/workspace/upper/{WAITING}")) - self._released
            if found:
                return found.pop()
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"no full check is waiting under {self._runs}")


def _running(container: str) -> bool:
    listed = subprocess.run(
        ["podman", "ps", "--quiet", "--filter", f"name=^{container}$"],
        capture_output=True,
        check=True,
        text=True,
    )
    return listed.stdout.strip() != ""


def _path(project: Project, review_id: str) -> str:
    return f"/projects/{project.id}/reviews/{review_id}"


def _approved(gate: Gate, lane: Lane, files: dict[str, str]) -> tuple[str, str]:
    """Push, request a review, let its gated check pass and approve: (commit, review id)."""
    commit = lane.push(files)
    review = lane.request_review(commit)
    gate.release()
    owner = lane.project.server.owner
    settled = owner.wait_receipt(lane.project.id, review["id"])
    assert settled["receipt"]["status"] == "passed", settled
    owner.ok("POST", f"{_path(lane.project, review['id'])}/approve", {"commit": commit})
    return commit, str(review["id"])


def _race(server: Server, *promotes: tuple[str, str]) -> list[tuple[int, Any]]:
    """POST each (path, commit) promote at once; the answers, in the same order."""
    barrier = threading.Barrier(len(promotes))
    answers: list[tuple[int, Any]] = [(0, None)] * len(promotes)

    def post(index: int, path: str, commit: str) -> None:
        barrier.wait()
        answers[index] = server.owner.call("POST", f"{path}/promote", {"commit": commit})

    threads = [
        threading.Thread(target=post, args=(index, *promote))
        for index, promote in enumerate(promotes)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RECEIPT_TIMEOUT)
    return answers


def _settled(server: Server, path: str) -> tuple[int, Any]:
    deadline = time.monotonic() + RECEIPT_TIMEOUT
    status, body = server.owner.call("GET", f"{path}/promotion")
    while status == 202 and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        status, body = server.owner.call("GET", f"{path}/promotion")
    return status, body


def _landed_once(project: Project, commit: str, review_id: str) -> None:
    """Canonical moved once, to `commit`, and the ledger has exactly that one entry."""
    state = project.server.owner.state(project.id)
    assert state["project"]["canonicalHead"] == commit
    [entry] = state["ledger"]
    assert (entry["commit"], entry["from"], entry["reviewId"]) == (
        commit,
        project.initial,
        review_id,
    )


def test_two_promotes_of_the_same_review_one_runs_the_other_is_refused(
    server: Server,
    required: Project,
) -> None:
    gate = Gate(server)
    commit, review_id = _approved(gate, new_lane(required), GATED)
    path = _path(required, review_id)
    answers = _race(server, (path, commit), (path, commit))
    # The winner's before-promote run is blocked: it cannot settle before its rival asks.
    assert sorted(status for status, _ in answers) == [202, 409], answers
    assert [body for status, body in answers if status == 409] == [ALREADY_RUNNING]
    gate.release()
    status, body = _settled(server, path)
    assert status == 200, body
    assert body["promotion"]["to"] == commit
    _landed_once(required, commit, review_id)


def test_two_promotes_of_two_reviews_of_one_project_exactly_one_fast_forwards(
    server: Server,
    required: Project,
) -> None:
    """Both forks branch from the initial import, so only the first to land fast-forwards;
    the lease serializes them and the second is refused, never written."""
    gate = Gate(server)
    first = _approved(gate, new_lane(required, "first"), GATED)
    second = _approved(gate, new_lane(required, "second"), GATED | {"second.txt": "b\n"})
    assert first[0] != second[0]
    reviews = {review_id: commit for commit, review_id in (first, second)}
    answers = _race(server, *((_path(required, r), c) for r, c in reviews.items()))
    # The lease holder's run is blocked and its rival waits for the lease: both are open.
    assert [status for status, _ in answers] == [202, 202], answers
    gate.release()
    settled = {r: _settled(server, _path(required, r)) for r in reviews}
    [winner] = [r for r, (status, _) in settled.items() if status == 200]
    [loser] = [r for r, (status, _) in settled.items() if status != 200]
    status, body = settled[loser]
    refusals = (
        f"Commit {reviews[loser]} does not fast-forward canonical ({reviews[winner]}).",
        "Canonical moved during promote; nothing was written.",
    )
    assert status == 409
    assert body["error"] in refusals, body
    _landed_once(required, reviews[winner], winner)


def test_a_push_to_the_fork_during_the_before_promote_run_refuses_the_promote(
    server: Server,
    required: Project,
) -> None:
    gate = Gate(server)
    lane = new_lane(required)
    commit, review_id = _approved(gate, lane, GATED)
    path = _path(required, review_id)
    [(status, body)] = _race(server, (path, commit))
    assert status == 202, body
    # The before-promote run is blocked in its full check while the agent pushes anew.
    marker = gate.waiting()
    pushed = lane.push({"later.txt": "a newer head\n"})
    review = server.owner.review(required.id, review_id)
    assert review["receipt"] == {**review["receipt"], "status": "running"}
    assert review["receipt"]["trigger"] == "before-promote"
    gate.release(marker)
    status, body = _settled(server, path)
    assert (status, body) == (409, {"error": f"The fork's head is {pushed}, not commit {commit}."})
    state = server.owner.state(required.id)
    assert state["project"]["canonicalHead"] == required.initial
    assert state["ledger"] == []
    assert server.owner.review(required.id, review_id)["promotion"] is None
