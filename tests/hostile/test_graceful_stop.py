"""Attack: stop the service while a full check runs, and count what stays behind.

`forkhorse serve` runs as a real process with real podman. An agent's full check sleeps; once
its container runs the server gets SIGTERM. A graceful stop drains: the process exits within
`STOP.stop_seconds`, the check's container is gone, its workspace tmpfs unmounted, and after
a restart the review's run is an infrastructure error that says the service stopped, never a
pass and never run again. (After a crash the next start sweeps: tests/e2e/test_serve.py.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.domain.limits import STOP, QueueLimits
from forkhorse.runner.local.scheduler import FairScheduler, Job, Stopped, Ticket
from forkhorse.runner.local.supervisor import SERVICE_STOPPED

from tests.integration.api.support import Client, Worktree, checks_files
from tests.support.resources import mounts_under, project_containers
from tests.support.serve import ServeProcess, free_port
from tests.support.waiting import eventually

WAIT_SECONDS = 120.0  # the server's start and the container's, on a loaded machine
SLEEP_SECONDS = 600  # the check would outlive the test by far


def _wait(condition: Callable[[], Any], what: str) -> Any:
    return eventually(condition, what, WAIT_SECONDS, poll=0.1)


@pytest.fixture
def home(tmp_path: Path, busybox_ref: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "images.json").write_text(json.dumps({"busybox": busybox_ref}))
    return home


@pytest.fixture
def started(home: Path) -> Iterator[list[ServeProcess]]:
    """Every server the test starts; any still running at the end is killed, and the
    containers of its home are removed."""
    processes: list[ServeProcess] = []
    yield processes
    for process in processes:
        process.stop(signal.SIGKILL)
    PodmanContainerPort(home.resolve()).cleanup_orphans(frozenset())  # what a failure left


def _serve(home: Path, port: int, started: list[ServeProcess]) -> ServeProcess:
    process = ServeProcess(home, port)
    process.start()
    started.append(process)
    return process


def _review(process: ServeProcess, workdir: Path, files: dict[str, str]) -> tuple[Client, str, str]:
    """A project, an agent's fork with `files` pushed, and its review requested."""
    owner = Client(process.url, (process.home / "owner-token").read_text().strip())
    body = {"name": "stop", "requireReceipt": False}
    project = owner.ok("POST", "/projects", body, expect=201)["project"]
    base = Worktree(workdir / "base")
    base.commit({"README.md": "hello\n"}, "initial import")
    assert owner.token is not None
    base.push(project["cloneUrl"], owner.token)
    created = owner.ok("POST", "/agents", {"name": "sleeper"}, expect=201)
    agent = Client(process.url, created["token"])
    path = f"/projects/{project['id']}"
    owner.ok("POST", f"{path}/members", {"agentId": created["agent"]["id"]}, expect=201)
    packet = owner.ok("POST", f"{path}/packets", {"title": "work"}, expect=201)["packet"]["id"]
    agent.ok("POST", f"{path}/packets/{packet}/claim", expect=201)
    fork = agent.ok("POST", f"{path}/forks", {"name": "sleeper"}, expect=201)["fork"]
    tree = Worktree(workdir / "agent")
    tree.git(created["token"], "pull", "-q", fork["cloneUrl"], "main")
    commit = tree.commit(files)
    tree.push(fork["cloneUrl"], created["token"])
    review = agent.ok(
        "POST",
        f"{path}/reviews",
        {"packetId": packet, "forkId": fork["id"], "commit": commit},
        202,
    )["review"]
    return owner, project["id"], review["id"]


def _stop_gracefully(process: ServeProcess) -> None:
    """SIGTERM, and the server exits cleanly within the stated bound."""
    assert process.process is not None
    signalled = time.monotonic()
    process.process.send_signal(signal.SIGTERM)
    try:
        code = process.process.wait(timeout=STOP.stop_seconds)
    except subprocess.TimeoutExpired:
        code = None
    print(f"\nforkhorse serve stopped {time.monotonic() - signalled:.2f} s after SIGTERM")
    assert code == 0, f"serve did not exit cleanly within {STOP.stop_seconds:.0f} s: {code}"


def test_sigterm_drains_a_running_full_check_and_leaves_nothing_behind(
    home: Path, tmp_path: Path, started: list[ServeProcess]
) -> None:
    port = free_port()
    process = _serve(home, port, started)
    files = checks_files(f"sleep {SLEEP_SECONDS}")
    owner, project, review = _review(process, tmp_path / "work", files)
    _wait(lambda: project_containers(project), "the sleeping check's container")
    assert owner.review(project, review)["receipt"]["status"] == "running"
    assert mounts_under(home) > 0, "the check's workspace is a tmpfs under the home"

    _stop_gracefully(process)
    assert project_containers(project) == [], "the check's container outlived the stop"
    assert mounts_under(home) == 0, "the check's workspace stayed mounted"
    assert not any((home / "runs").iterdir()), "the check's run directory stayed"
    started.remove(process)

    restarted = _serve(home, port, started)
    receipt = Client(restarted.url, owner.token).review(project, review)["receipt"]
    assert receipt["status"] == "infrastructure-error"
    assert receipt["digest"] is None
    [quick] = [row for row in receipt["checks"] if row["tier"] == "quick"]
    assert quick["outcome"] == "passed"
    [check] = [row for row in receipt["checks"] if row["tier"] == "full"]
    assert (check["outcome"], check["message"]) == ("infrastructure-error", SERVICE_STOPPED)
    time.sleep(1.0)  # a run that restarted would have started a container by now
    assert project_containers(project) == [], "the stopped run was not run again"
    restarted.stop()
    started.remove(restarted)


SPIN = "def check(ctx):\n    while True:\n        pass\n"
SPINNING = {
    ".forkhorse/checks": '[{"name":"spin","tier":"quick","module":".forkhorse/quick/spin.py"}]\n',
    ".forkhorse/quick/spin.py": SPIN,
}


def _descendants(pid: int) -> dict[int, str]:
    """Every live process below `pid`, with its command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    below: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - below
        below |= frontier
    lines = {}
    for child in below:
        try:
            lines[child] = (Path("/proc") / str(child) / "cmdline").read_bytes().decode()
        except OSError:
            continue
    return lines


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.sandbox  # the quick check runs in bubblewrap, inside `forkhorse serve`
def test_sigterm_during_a_quick_check_leaves_no_sandbox(
    home: Path, tmp_path: Path, started: list[ServeProcess]
) -> None:
    port = free_port()
    process = _serve(home, port, started)
    owner, project, review = _review(process, tmp_path / "work", SPINNING)
    assert process.pid is not None
    pid = process.pid
    sandboxes = _wait(
        lambda: [child for child, line in _descendants(pid).items() if "bwrap" in line],
        "the spinning quick check's sandbox",
    )
    _stop_gracefully(process)
    _wait(lambda: not any(_alive(sandbox) for sandbox in sandboxes), "the sandbox's end")
    started.remove(process)

    restarted = _serve(home, port, started)
    receipt = Client(restarted.url, owner.token).review(project, review)["receipt"]
    assert receipt["status"] == "infrastructure-error"
    [check] = receipt["checks"]
    assert (check["outcome"], check["message"]) == ("infrastructure-error", SERVICE_STOPPED)
    restarted.stop()
    started.remove(restarted)


# --- scheduler level: what a stop does to runs ---------------------------------------------


def test_a_stop_ends_holders_at_their_next_step_waiters_at_once_and_drops_the_queued() -> None:
    scheduler = FairScheduler(QueueLimits(full_slots=1))
    gate, lock = threading.Event(), threading.Lock()
    seen: dict[str, str] = {}

    def body(ticket: Ticket) -> None:
        try:
            with ticket.slot("full"):
                with lock:
                    seen[ticket.job.key] = "holds"
                gate.wait(60)
                ticket.check()
        except Stopped:
            with lock:
                seen[ticket.job.key] = "stopped"

    scheduler.submit(Job("holder", "A", "agent-a", False), body)
    _wait(lambda: seen.get("holder") == "holds", "the holder's slot")
    scheduler.submit(Job("waiter", "B", "agent-b", False), body)  # waits for the one slot
    scheduler.submit(Job("queued", "C", "agent-b", False), body)  # agent-b runs one at a time
    _wait(lambda: "waiter" in scheduler.active_keys(), "the waiter admitted")
    scheduler.stop()
    _wait(lambda: seen.get("waiter") == "stopped", "the waiter stopped without a slot")
    assert seen["holder"] == "holds", "the holder ends at its next step, not mid-step"
    gate.set()
    dropped, stuck = scheduler.shutdown(10)
    assert (dropped, stuck) == ([Job("queued", "C", "agent-b", False)], [])
    assert seen == {"holder": "stopped", "waiter": "stopped"}
