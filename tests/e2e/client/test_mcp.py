"""`forkhorse mcp` driven by the MCP SDK's own client over stdio: the tools and their
schemas, then an agent's submit, wait and attach, and an owner's approve and promote."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.client.conftest import seat
from tests.e2e.client.support import Cli, Seen, run_async
from tests.integration.api.support import checks_files
from tests.support.live import Project, Server

AGENT_TOOLS = {
    "list_projects",
    "list_packets",
    "claim_packet",
    "submit_review",
    "wait_for_receipt",
    "get_state",
    "get_gate_reasons",
    "attach_review_receipt",
    "approve",
    "promote",
}
FLOW_RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}
CALL_SECONDS = 240


def _parameters(cli: Cli) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "forkhorse.cli", "mcp"], env=cli.env(), cwd=cli.home
    )


class Session:
    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.progress: list[str] = []

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.progress.append(message or "")

        result = await self.session.call_tool(
            name, arguments, read_timeout_seconds=CALL_SECONDS, progress_callback=on_progress
        )
        assert not result.is_error, result.content
        content: dict[str, Any] | None = result.structured_content
        assert content is not None
        return content

    async def refused(self, name: str, **arguments: Any) -> str:
        result = await self.session.call_tool(name, arguments, read_timeout_seconds=CALL_SECONDS)
        assert result.is_error
        return " ".join(getattr(part, "text", "") for part in result.content)


async def _with_session(cli: Cli, scenario: Any) -> Any:
    async with (
        stdio_client(_parameters(cli)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await scenario(Session(session))


def test_the_mcp_tools_take_an_agent_from_submit_to_promote(
    server: Server, required: Project, owner_cli: Cli, agent_home: Path, seen: Seen
) -> None:
    agent = seat(server, required, agent_home, seen, "mcp-agent")
    commit = agent.checkout.commit(checks_files(), "quick checks only")

    async def as_agent(mcp: Session) -> str:
        tools = {tool.name: tool for tool in (await mcp.session.list_tools()).tools}
        assert set(tools) == AGENT_TOOLS
        submit = tools["submit_review"].input_schema
        assert set(submit["required"]) == {"project", "packet", "checkout"}
        assert submit["properties"]["follow_pushes"]["type"] == "boolean"
        wait = tools["wait_for_receipt"]
        assert wait.input_schema["properties"]["timeout_seconds"]["maximum"] == 600
        assert wait.output_schema is not None
        assert {"status", "digest", "receipt"} <= set(wait.output_schema["properties"])

        packets = await mcp.call("list_packets", project=required.id)
        assert [p["id"] for p in packets["packets"]] == [agent.packet]
        claimed = await mcp.call("claim_packet", project=required.id, packet=agent.packet)
        assert claimed["claim"]["packetId"] == agent.packet
        submitted = await mcp.call(
            "submit_review",
            project=required.id,
            packet=agent.packet,
            checkout=str(agent.checkout.path),
        )
        assert submitted["commit"] == commit
        review = str(submitted["review"])
        settled = await mcp.call("wait_for_receipt", project=required.id, review=review)
        assert (settled["status"], settled["receipt"]["trigger"]) == ("passed", "review-created")
        assert "quick: started" in mcp.progress
        assert "quick: passed" in mcp.progress
        stored = await mcp.call(
            "attach_review_receipt", project=required.id, review=review, receipt=FLOW_RECEIPT
        )
        assert set(stored) == {"digest", "classification"}
        # An agent's token cannot approve: a tool error with the service's own sentence.
        refusal = await mcp.refused("approve", project=required.id, review=review)
        status, body = server.client(agent.cli.token).call(
            "POST",
            f"/projects/{required.id}/reviews/{review}/approve",
            {"commit": commit},
        )
        # (The SDK puts "Error executing tool approve: " before the text.)
        assert status == 403
        assert refusal == f"Error executing tool approve: {body['error']}"
        return review

    review = run_async(_with_session, agent.cli, as_agent)

    async def as_owner(mcp: Session) -> None:
        gate = await mcp.call("get_gate_reasons", project=required.id, review=review)
        assert gate["approve"] == {"allowed": True, "reasons": []}
        approved = await mcp.call("approve", project=required.id, review=review)
        assert approved["approval"]["commit"] == commit
        promoted = await mcp.call("promote", project=required.id, review=review)
        assert promoted["promotion"]["to"] == commit
        assert promoted["promotion"]["from"] == required.initial
        assert promoted["run"]["trigger"] == "before-promote"
        state = await mcp.call("get_state", project=required.id)
        assert state["project"]["canonicalHead"] == commit
        listed = await mcp.call("list_projects")
        assert required.id in json.dumps(listed)

    run_async(_with_session, owner_cli, as_owner)
