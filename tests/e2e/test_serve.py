"""`forkhorse serve --demo` as a real subprocess: reachable, owner token written, the demo's
receipt real, state surviving a restart, and an interrupted run becoming an infrastructure
error after a crash."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from typing import Any

import requests

from tests.integration.api.support import Worktree
from tests.support.resources import mounts_under, project_containers
from tests.support.serve import ServeProcess
from tests.support.waiting import eventually

TIMEOUT = 120.0


def _get(process: ServeProcess, path: str, token: str) -> Any:
    response = requests.get(
        process.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()


def _wait(condition: Callable[[], Any], what: str) -> Any:
    return eventually(condition, what, TIMEOUT, poll=0.1)


def _demo_receipt(process: ServeProcess, token: str) -> dict[str, Any]:
    demo = json.loads((process.home / "demo.json").read_text())
    state = _get(process, f"/projects/{demo['project']}/state", token)
    return next(r for r in state["reviews"] if r["id"] == demo["review"])


def test_serve_demo_survives_restarts_and_fails_interrupted_runs_closed(
    serve: Callable[..., ServeProcess],
) -> None:
    process = serve("--demo")
    token = (process.home / "owner-token").read_text().strip()
    assert (process.home / "owner-token").stat().st_mode & 0o777 == 0o600
    _wait(lambda: (process.home / "demo.json").exists(), "the demo seed")
    review = _wait(
        lambda: (r := _demo_receipt(process, token))["receipt"]["status"] != "running" and r,
        "the demo receipt",
    )
    assert review["receipt"]["status"] == "passed"
    runtimes = [(c["name"], c["runtime"]) for c in review["receipt"]["checks"]]
    assert runtimes == [("readme", "dynamic-worker"), ("test", "container")]

    # A restart keeps everything and does not seed again.
    process.stop()
    process = serve("--demo")
    assert (process.home / "owner-token").read_text().strip() == token
    assert _demo_receipt(process, token) == review
    demo = json.loads((process.home / "demo.json").read_text())
    assert len(_get(process, "/projects", token)["projects"]) == 1

    # A long run interrupted by a crash becomes an infrastructure error on the next start.
    agent = (process.home / "demo-agent-token").read_text().strip()
    state = _get(process, f"/projects/{demo['project']}/state", token)
    fork = state["forks"][0]
    tree = Worktree(process.home.parent / "agent-work")
    tree.git(agent, "pull", "-q", fork["cloneUrl"], "main")
    sleepy = '[{"name":"sleepy","tier":"full","image":"busybox","run":"sleep 60"}]'
    commit = tree.commit({".forkhorse/checks": sleepy})
    tree.push(fork["cloneUrl"], agent)
    created = requests.post(
        f"{process.url}/projects/{demo['project']}/reviews",
        json={"packetId": demo["packet"], "forkId": fork["id"], "commit": commit},
        headers={"Authorization": f"Bearer {agent}"},
        timeout=30,
    )
    assert created.status_code == 202, created.text
    review_id = created.json()["review"]["id"]

    def sleeping() -> bool:
        """The full check's container runs (a full check has no result until it ends)."""
        state = _get(process, f"/projects/{demo['project']}/state", token)
        receipt = next(r for r in state["reviews"] if r["id"] == review_id)["receipt"]
        return receipt["status"] == "running" and project_containers(demo["project"]) != []

    _wait(sleeping, "the sleepy container")
    process.stop(signal.SIGKILL)
    process = serve()
    state = _get(process, f"/projects/{demo['project']}/state", token)
    receipt = next(r for r in state["reviews"] if r["id"] == review_id)["receipt"]
    assert receipt["status"] == "infrastructure-error"
    assert receipt["digest"] is None
    orphan_gone = "the orphan's removal in the background"
    _wait(lambda: project_containers(demo["project"]) == [], orphan_gone)
    # Its run directory (and the workspace tmpfs mounted in it) goes too.
    _wait(lambda: mounts_under(process.home) == 0, "the orphan's workspace unmounted")
    _wait(lambda: not any((process.home / "runs").iterdir()), "the orphan's run directory")
