"""`forkhorse serve` as a real subprocess answers git's protocol version 2 and partial
clones to the stock git CLI (issue 29)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import requests

from tests.integration.api.support import git_env
from tests.support.serve import ServeProcess
from tests.support.waiting import eventually


def _git(home: Path, token: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**git_env(home, token), "GIT_TRACE_PACKET": "1"}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_serve_answers_v2_and_partial_clones(
    serve: Callable[..., ServeProcess], tmp_path: Path
) -> None:
    process = serve("--demo")
    eventually(lambda: (process.home / "demo.json").exists(), "the demo seed", 120.0, poll=0.1)
    demo = json.loads((process.home / "demo.json").read_text())
    owner = (process.home / "owner-token").read_text().strip()
    agent = (process.home / "demo-agent-token").read_text().strip()
    state = requests.get(
        f"{process.url}/projects/{demo['project']}/state",
        headers={"Authorization": f"Bearer {owner}"},
        timeout=30,
    ).json()
    clone_url = state["forks"][0]["cloneUrl"]
    work = tmp_path / "partial"
    cloned = _git(
        tmp_path,
        agent,
        *("-c", "protocol.version=2", "clone", "--filter=blob:none", clone_url, str(work)),
        cwd=tmp_path,
    )
    assert cloned.returncode == 0, cloned.stderr
    assert "< version 2" in cloned.stderr
    assert "command=ls-refs" in cloned.stderr
    assert "> filter blob:none" in cloned.stderr
    assert any(work.iterdir())  # the checkout's blobs came by lazy fetches
    logged = _git(tmp_path, agent, "-c", "protocol.version=2", "log", "-p", cwd=work)
    assert logged.returncode == 0, logged.stderr
    listed = _git(tmp_path, agent, "rev-list", "--objects", "--all", "--missing=print", cwd=work)
    assert "\n?" not in "\n" + listed.stdout  # every object is here after log -p
    # an unsupported filter: a full clone, not a refusal
    full = tmp_path / "full"
    head = listed.stdout.split()[0]
    spec = f"--filter=sparse:oid={head}"
    cloned = _git(tmp_path, agent, "clone", "-q", spec, clone_url, str(full), cwd=tmp_path)
    assert cloned.returncode == 0, cloned.stderr

    def demo_settled() -> bool:
        """The demo's own review run ends first, so the stop leaves nothing behind."""
        reviews = requests.get(
            f"{process.url}/projects/{demo['project']}/state",
            headers={"Authorization": f"Bearer {owner}"},
            timeout=30,
        ).json()["reviews"]
        return all(review["receipt"]["status"] != "running" for review in reviews)

    eventually(demo_settled, "the demo receipt", 120.0, poll=0.2)
    process.stop()
