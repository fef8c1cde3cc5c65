"""The demo seed: once per home, a project with an agent, a fork, a packet and a reviewed
smoke commit, so a newcomer sees a real receipt. Git goes over the real smart-HTTP server."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import tempfile
from pathlib import Path

from forkhorse.service.identity import Caller
from forkhorse.wiring.local import LocalApp

log = logging.getLogger(__name__)

DEMO_FILE = "demo.json"
AGENT_TOKEN_FILE = "demo-agent-token"  # noqa: S105 - a file name, not a secret
README = "# Smoke\n\nThe Forkhorse demo project.\n"
# A quick check (fresh sandbox, no network) ahead of the smoke project's `npm test`.
SMOKE_CHECKS = (
    '[{"name":"readme","tier":"quick","module":".forkhorse/quick/readme.py"},'
    '{"name":"test","tier":"full","image":"default","run":"npm test"}]\n'
)
README_CHECK = (
    "def check(ctx):\n"
    '    text = ctx.read("README.md")\n'
    '    return {"ok": bool(text and text.strip()), "message": "README.md says what this is."}\n'
)
SMOKE_PACKAGE = '{"scripts":{"test":"node -e \\"if (2 + 2 !== 4) process.exit(1)\\""}}\n'


def seed_demo(app: LocalApp, home: Path, url: str, owner_token: str) -> dict[str, str] | None:
    """Seed unless this home already has the demo; returns the demo's ids."""
    marker = home / DEMO_FILE
    if marker.exists():
        log.info("demo already seeded: %s", marker)
        return None
    try:
        ids = _seed(app, home, url, owner_token)
    except Exception:
        log.exception("demo seeding failed")
        return None
    marker.write_text(json.dumps(ids, indent=2) + "\n", encoding="utf-8")
    print(f"Demo project {ids['project']} seeded; its receipt is running.", flush=True)
    print(f"  state: curl -H 'Authorization: Bearer <owner token>' {url}/projects/"
          f"{ids['project']}/state", flush=True)  # fmt: skip
    return ids


def _seed(app: LocalApp, home: Path, url: str, owner_token: str) -> dict[str, str]:
    service = app.service
    owner = service.authenticate(owner_token)
    assert owner is not None
    project = service.projects.create_project(owner, "smoke", True).project
    with tempfile.TemporaryDirectory(prefix="forkhorse-demo-") as scratch:
        work = Path(scratch)
        _git(work, "init", "-q", "-b", "main")
        (work / "README.md").write_text(README, encoding="utf-8")
        _commit(work, "Initial import")
        _push(work, project.clone_url, owner_token)
        created = service.projects.create_agent(owner, "demo-agent")
        agent = Caller(created.agent.id, "agent")
        token_path = home / AGENT_TOKEN_FILE
        token_path.write_text(created.token + "\n", encoding="utf-8")
        token_path.chmod(0o600)
        service.projects.add_member(owner, project.id, agent.id)
        fork = service.projects.create_fork(agent, project.id, "smoke-fork").fork
        packet = service.projects.create_packet(owner, project.id, "Add the smoke test")
        packet_id = packet.packet.id
        service.projects.claim(agent, project.id, packet_id)
        (work / ".forkhorse").mkdir()
        (work / ".forkhorse" / "checks").write_text(SMOKE_CHECKS, encoding="utf-8")
        (work / ".forkhorse" / "quick").mkdir()
        (work / ".forkhorse" / "quick" / "readme.py").write_text(README_CHECK, encoding="utf-8")
        (work / "package.json").write_text(SMOKE_PACKAGE, encoding="utf-8")
        commit = _commit(work, "Smoke test")
        _push(work, fork.clone_url, created.token)
    review = service.reviews.request(agent, project.id, packet_id, fork.id, commit, True)
    return {
        "project": project.id,
        "agent": agent.id,
        "fork": fork.id,
        "packet": packet_id,
        "review": review.review.id,
        "commit": commit,
    }


def _git(work: Path, *args: str, extra_env: dict[str, str] | None = None) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Forkhorse Demo",
        "GIT_AUTHOR_EMAIL": "demo@forkhorse.invalid",
        "GIT_COMMITTER_NAME": "Forkhorse Demo",
        "GIT_COMMITTER_EMAIL": "demo@forkhorse.invalid",
        **(extra_env or {}),
    }
    done = subprocess.run(
        ["git", *args], cwd=work, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def _commit(work: Path, message: str) -> str:
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", message)
    return _git(work, "rev-parse", "HEAD")


def _push(work: Path, clone_url: str, token: str) -> None:
    """Push with the token in an HTTP header passed through the environment (not argv)."""
    _git(work, "push", "-q", clone_url, "HEAD:refs/heads/main", extra_env=auth_env(token))


def auth_env(token: str) -> dict[str, str]:
    basic = base64.b64encode(f"forkhorse:{token}".encode()).decode("ascii")
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }
