"""`forkhorse mcp` driven by the MCP SDK's own client over stdio: the tools and their
schemas, then an agent's submit, wait and attach, and an owner's approve and promote."""

from __future__ import annotations

import importlib.metadata
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

        listed = await mcp.call("list_projects")
        assert [p["id"] for p in listed["projects"]] == [required.id]
        packets = await mcp.call("list_packets", project=required.id)
        mine = next(p for p in packets["packets"] if p["id"] == agent.packet)
        assert (mine["claim"], packets["next"]) == (None, None)
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
        pid, base = promoted["promotion"]["id"], f"/projects/{required.id}"
        assert promoted["promotion"]["links"] == {
            "ledger": f"{base}/ledger/{pid}",
            "attestation": f"{base}/promotions/{pid}/attestation",
        }
        assert promoted["promotion"]["from"] == required.initial
        assert promoted["run"]["trigger"] == "before-promote"
        state = await mcp.call("get_state", project=required.id)
        assert state["project"]["canonicalHead"] == commit
        listed = await mcp.call("list_projects")
        assert required.id in json.dumps(listed)

    run_async(_with_session, owner_cli, as_owner)


READ_ONLY = {"list_projects", "list_packets", "wait_for_receipt", "get_state", "get_gate_reasons"}


def test_the_tools_say_what_they_do_and_refuse_bad_arguments_in_one_sentence(
    server: Server, required: Project, agent_home: Path, seen: Seen
) -> None:
    agent = seat(server, required, agent_home, seen, "mcp-hints")
    # An agent that knows only the URL and its token: no project configured.
    bare = Cli(agent.cli.url, agent.cli.token, agent_home, seen)

    async def scenario(mcp: Session) -> None:
        tools = {tool.name: tool for tool in (await mcp.session.list_tools()).tools}
        for name, tool in tools.items():
            hints = tool.annotations
            assert hints is not None, name
            assert hints.read_only_hint is (name in READ_ONLY), name
            assert hints.destructive_hint is (name == "promote"), name
            assert hints.idempotent_hint is not None, name
            for field, schema in tool.input_schema["properties"].items():
                assert schema.get("description"), (name, field)
        idempotent = {
            name: getattr(tool.annotations, "idempotent_hint", None) for name, tool in tools.items()
        }
        assert (idempotent["claim_packet"], idempotent["approve"]) == (True, True)
        assert (idempotent["submit_review"], idempotent["promote"]) == (False, False)

        listed = await mcp.call("list_projects")
        assert [p["id"] for p in listed["projects"]] == [required.id]
        first = await mcp.call("list_packets", project=required.id, limit=1)
        assert len(first["packets"]) == 1
        assert first["next"] is not None or agent.packet == first["packets"][0]["id"]

        too_long = await mcp.refused(
            "wait_for_receipt", project=required.id, review="r", timeout_seconds=601
        )
        assert too_long == (
            "Invalid arguments to wait_for_receipt: timeout_seconds should be less than or "
            "equal to 600."
        )
        missing = await mcp.refused("claim_packet", project=required.id)
        assert missing == "Invalid arguments to claim_packet: packet is required."
        several = await mcp.refused("approve", project="", review="r", commit="HEAD")
        assert several == (
            "Invalid arguments to approve: project should have at least 1 character; "
            "commit should match pattern '^[0-9a-f]{40}$'."
        )
        assert "HEAD" not in several  # the value given is never echoed
        page = await mcp.refused("list_packets", project=required.id, limit=0)
        assert (
            page == "Invalid arguments to list_packets: limit should be greater than or equal to 1."
        )

    async def with_version(cli: Cli) -> None:
        async with (
            stdio_client(_parameters(cli)) as (read, write),
            ClientSession(read, write) as session,
        ):
            started = await session.initialize()
            assert (started.server_info.name, started.server_info.version) == (
                "forkhorse",
                importlib.metadata.version("forkhorse"),
            )
            await scenario(Session(session))

    run_async(with_version, bare)
