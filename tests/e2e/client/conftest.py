"""An agent's checkout and the CLI for an agent and an owner, against the live server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.client.support import Cli, Seen
from tests.integration.api.support import Worktree
from tests.support.live import Project, Server


@dataclass
class AgentSeat:
    """An agent of `project` with an unclaimed packet and a checkout of canonical."""

    project: Project
    cli: Cli
    agent_id: str
    packet: str
    checkout: Worktree


def seat(server: Server, project: Project, home: Path, seen: Seen, name: str) -> AgentSeat:
    agent, agent_id = project.agent(name)
    assert agent.token is not None
    tree = server.worktree()
    tree.git(agent.token, "pull", "-q", project.canonical_url, "main")
    cli = Cli(server.url, agent.token, home, seen, project.id)
    return AgentSeat(project, cli, agent_id, project.packet(), tree)


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def owner_cli(server: Server, tmp_path: Path, seen: Seen) -> Cli:
    home = tmp_path / "owner-home"
    home.mkdir()
    return Cli(server.url, server.owner_token, home, seen)


@pytest.fixture
def agent_home(tmp_path: Path) -> Path:
    home = tmp_path / "agent-home"
    home.mkdir()
    return home
