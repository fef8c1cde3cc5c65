"""No command shows a token: not in any process's arguments while it runs (git's push
included), not in `.git/config`, not in the service's logs, and not in any command's output
or error output, whether it succeeds or is refused."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.client.conftest import seat
from tests.e2e.client.support import Cli, Seen, run_async
from tests.integration.api.support import checks_files
from tests.support.live import Project, Server


def test_no_command_shows_a_token(
    server: Server,
    required: Project,
    owner_cli: Cli,
    agent_home: Path,
    seen: Seen,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    agent = seat(server, required, agent_home, seen, "leak-check")
    agent.checkout.commit(checks_files(), "quick checks only")
    token = agent.cli.token
    tokens = (token, server.owner_token)

    # A profile written by `login` (the token read from standard input) drives the rest.
    login = agent.cli.run("login", "--url", server.url, "--profile", "work", stdin=token + "\n")
    assert login.code == 0, login.stderr
    config = agent_home / ".config/forkhorse/config.toml"
    assert config.stat().st_mode & 0o777 == 0o600
    profile = {"FORKHORSE_TOKEN": "", "FORKHORSE_URL": "", "FORKHORSE_PROFILE": "work"}

    submitted = agent.cli.run(
        "submit", "--packet", agent.packet, "--json", cwd=agent.checkout.path, env=profile
    )
    assert submitted.code == 0, submitted.stderr
    review = submitted.json()["review"]
    assert agent.cli.run("status", env=profile).code == 0
    assert agent.cli.run("wait", review, env=profile).code == 0
    assert agent.cli.run("approve", review, env=profile).code == 3  # an agent may not
    assert agent.cli.run("gate", review, "--json", env=profile).code == 3
    assert agent.cli.run("projects", "--url", "http://127.0.0.1:9", env=profile).code == 2
    token_file = tmp_path / "owner-token"
    token_file.write_text(server.owner_token + "\n")
    owner = {"FORKHORSE_TOKEN": ""}
    assert owner_cli.run("projects", "--token-file", str(token_file), env=owner).code == 0
    assert owner_cli.run("gate", review, "--token-file", str(token_file), env=owner).code == 0
    assert owner_cli.run("wait", "no-such-review", env=owner).code == 3

    mcp_errors = tmp_path / "mcp-stderr.log"
    run_async(_mcp_session, agent.cli, required.id, review, mcp_errors)

    assert seen.command_lines, "the process list was sampled"
    git_config = (agent.checkout.path / ".git/config").read_text()
    places = {
        "process arguments": "\n".join(seen.command_lines),
        "command output": "\n".join(seen.outputs),
        ".git/config": git_config,
        "service logs": caplog.text,
        "MCP server stderr": mcp_errors.read_text(),
    }
    for secret in tokens:
        for place, text in places.items():
            assert secret not in text, f"a token in the {place}"
    assert not (agent_home / ".git-credentials").exists()
    # The push did happen (through the credential helper: no URL carried the token).
    forks = server.owner.state(required.id)["forks"]
    assert [fork["head"] for fork in forks] == [submitted.json()["commit"]]


async def _mcp_session(cli: Cli, project: str, review: str, errors: Path) -> None:
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "forkhorse.cli", "mcp"], env=cli.env()
    )
    with errors.open("w") as errlog:
        async with (
            stdio_client(parameters, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            state = await session.call_tool("get_state", {"project": project})
            assert not state.is_error
            refused = await session.call_tool("promote", {"project": project, "review": review})
            assert refused.is_error
