"""`forkhorse mcp`: the client's moves as MCP tools, over stdio, with the official SDK.

Every tool answers a typed model (its output schema); a refusal is a tool error carrying
the service's own sentence. Credentials come from the same configuration as the CLI.
The client's witness looks at the server's transparency log at the start of each tool call;
a log it refuses (another key, a rollback, a split view, rewritten history) fails the call.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forkhorse import responses
from forkhorse.client import workflow
from forkhorse.client.api import ForkhorseClient
from forkhorse.client.config import ClientConfig
from forkhorse.client.errors import ApiError, ClientError
from forkhorse.client.follow import MAX_WAIT_SECONDS, CheckEvent, follow, review_summary
from forkhorse.domain.limits import PAGE
from forkhorse.domain.receipts import ReceiptSummary

# A tool call waits at most this long; a longer wait is another call.
MAX_TOOL_WAIT_SECONDS = 600.0
DEFAULT_TOOL_WAIT_SECONDS = 300.0

ProjectId = Annotated[str, Field(min_length=1, max_length=200, description="The project's id.")]
ReviewId = Annotated[str, Field(min_length=1, max_length=200, description="The review's id.")]
PacketId = Annotated[str, Field(min_length=1, max_length=200, description="The packet's id.")]
Commit = Annotated[
    str | None,
    Field(
        default=None,
        pattern=r"^[0-9a-f]{40}$",
        description="The commit's full 40-hex id. Default: the review's commit.",
    ),
]
Cursor = Annotated[
    str | None,
    Field(default=None, max_length=PAGE.cursor_chars, description="A page's `next`, to go on."),
]
Limit = Annotated[
    int | None,
    Field(default=None, ge=1, le=PAGE.max_size, description="The page size (default 50)."),
]

# What each tool does to the service, for MCP clients deciding what to confirm.
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
CLAIM = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
CREATE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
CONSENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
PROMOTE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)


class _Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class Submitted(_Out):
    project: str
    review: str
    commit: str
    fork: str
    console: str
    receipt: ReceiptSummary | None


class Settled(_Out):
    project: str
    review: str
    status: str
    digest: str | None
    console: str
    receipt: ReceiptSummary


class PromoteResult(_Out):
    promotion: responses.DonePromotion
    run: ReceiptSummary | None = Field(description="The before-promote run that was followed.")


def version() -> str:
    """The forkhorse package's version (the layer, without metadata, carries `__version__`)."""
    try:
        return importlib.metadata.version("forkhorse")
    except importlib.metadata.PackageNotFoundError:
        from forkhorse import __version__

        return __version__


class _Server(MCPServer[Any]):
    """The SDK's server, with arguments that fail their schema refused in one sentence
    (the SDK's text is pydantic's multi-line dump)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as failed:
            if isinstance(failed.__cause__, ValidationError):
                raise ToolError(invalid_arguments(name, failed.__cause__)) from failed.__cause__
            raise


def invalid_arguments(tool: str, invalid: ValidationError) -> str:
    """One sentence naming each argument that is wrong and why (never its value)."""
    problems = []
    for error in invalid.errors(include_input=False, include_url=False):
        name = ".".join(str(part) for part in error["loc"]) or "the arguments"
        message = str(error["msg"])
        if error["type"] == "missing":
            problems.append(f"{name} is required")
            continue
        for subject in ("Input ", "String ", "Value ", "List ", "Dictionary "):
            if message.startswith(subject + "should "):
                message = message.removeprefix(subject)
                break
        else:
            message = f"is invalid ({message[:1].lower()}{message[1:]})"
        problems.append(f"{name} {message}")
    return f"Invalid arguments to {tool}: {'; '.join(problems)}."


def build(config: ClientConfig) -> MCPServer[Any]:
    client = ForkhorseClient(config)
    server: MCPServer[Any] = _Server(
        "forkhorse",
        version=version(),
        instructions=(
            "Forkhorse reviews your commits. list_projects names your projects and "
            "list_packets a project's packets (claim null: free to claim); submit_review "
            "pushes a checkout's HEAD to your fork, claims the packet and requests the "
            "review; wait_for_receipt follows the checks to a receipt."
        ),
    )

    def call[T](move: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        client.witness_next_call()
        try:
            result = move(*args, **kwargs)
        except ClientError as failed:
            raise _tool_error(failed) from None
        return result

    @server.tool(annotations=READ)
    def list_projects() -> responses.ProjectList:
        """Your projects: an owner's own, or the ones this agent is a member of."""
        return call(client.list_projects)

    @server.tool(annotations=READ)
    def list_packets(
        project: ProjectId, cursor: Cursor = None, limit: Limit = None
    ) -> responses.PacketPage:
        """One page of the project's work packets, each with its live claim (claim null:
        free to claim); pass the page's next as cursor for more."""
        return call(client.list_packets, project, cursor, limit)

    @server.tool(annotations=CLAIM)
    def claim_packet(project: ProjectId, packet: PacketId) -> responses.ClaimBody:
        """Claim a packet, or renew your claim (a claim is a lease)."""
        return call(client.claim, project, packet)

    @server.tool(annotations=CREATE)
    def submit_review(
        project: ProjectId,
        packet: PacketId,
        checkout: Annotated[str, Field(description="Path of a git checkout; its HEAD is sent.")],
        fork: Annotated[
            str | None, Field(description="Your fork's name (default: your only fork, or new).")
        ] = None,
        follow_pushes: Annotated[
            bool, Field(description="The review moves to each later push to your fork.")
        ] = False,
    ) -> Submitted:
        """Push the checkout's HEAD to your fork (created if you have none), claim the
        packet and request the review; the receipt starts running."""
        done: workflow.Submitted = call(
            workflow.submit,
            client,
            project,
            packet,
            Path(checkout),
            fork_name=fork,
            follow_pushes=follow_pushes,
        )
        return Submitted(
            project=project,
            review=done.review.id,
            commit=done.commit,
            fork=done.fork.id,
            console=client.console_link(project, done.review.id),
            receipt=done.review.receipt,
        )

    @server.tool(annotations=READ)
    async def wait_for_receipt(
        project: ProjectId,
        review: ReviewId,
        ctx: Context,
        timeout_seconds: Annotated[
            float,
            Field(
                gt=0,
                le=MAX_TOOL_WAIT_SECONDS,
                description="Seconds to follow at most (call again to wait longer).",
            ),
        ] = DEFAULT_TOOL_WAIT_SECONDS,
    ) -> Settled:
        """Follow the review's receipt until it settles, with a progress notification as
        each check starts and ends; an error if it is still running after the timeout."""
        client.witness_next_call()
        events = follow(
            lambda: review_summary(client, project, review),
            timeout=min(timeout_seconds, MAX_WAIT_SECONDS),
        )
        done = 0
        while True:
            item = await anyio.to_thread.run_sync(_next_or_error, events)
            if isinstance(item, ReceiptSummary):
                return Settled(
                    project=project,
                    review=review,
                    status=item.status,
                    digest=item.digest,
                    console=client.console_link(project, review),
                    receipt=item,
                )
            done += 0 if item.started else 1
            verb = "started" if item.started else item.check.outcome
            await ctx.report_progress(done, None, f"{item.check.name}: {verb}")

    @server.tool(annotations=READ)
    def get_state(project: ProjectId) -> responses.ProjectState:
        """The project as you may see it: canonical, forks, packets, reviews, ledger."""
        return call(client.state, project)

    @server.tool(annotations=READ)
    def get_gate_reasons(project: ProjectId, review: ReviewId) -> responses.GateView:
        """Would approve and promote be refused now, and why (owner)."""
        return call(client.gate, project, review)

    @server.tool(annotations=CREATE)
    def attach_review_receipt(
        project: ProjectId,
        review: ReviewId,
        receipt: Annotated[dict[str, Any], Field(description="A Flow-Next review receipt.")],
    ) -> responses.StoredReviewReceipt:
        """Attach a Flow-Next review receipt to the review."""
        return call(client.add_review_receipt, project, review, receipt)

    @server.tool(annotations=CONSENT)
    def approve(
        project: ProjectId, review: ReviewId, commit: Commit = None
    ) -> responses.ApprovalBody:
        """Approve the review's commit (owner); the gate applies in required mode."""
        target = commit or call(client.review, project, review).commit
        return call(client.approve, project, review, target)

    @server.tool(annotations=PROMOTE)
    def promote(project: ProjectId, review: ReviewId, commit: Commit = None) -> PromoteResult:
        """Promote the review's commit (owner): a fresh before-promote run, then a
        fast-forward of canonical. Fails with "Checks failed before promote." when it does.
        The promotion carries its id and the paths of its ledger entry and signed VSA."""
        outcome: workflow.PromoteOutcome = call(
            workflow.promote, client, project, review, commit, None, MAX_TOOL_WAIT_SECONDS
        )
        if outcome.status != 200:
            raise _tool_error(ApiError.from_body(outcome.status, outcome.body))
        return PromoteResult(
            promotion=responses.Promoted.model_validate(outcome.body).promotion, run=outcome.run
        )

    return server


def _tool_error(failed: Exception) -> ToolError:
    """A tool error with the service's own sentence (and a gate's reasons, one a line)."""
    if isinstance(failed, ApiError):
        reasons = "".join(f"\n- {reason}" for reason in failed.reasons or ())
        return ToolError(failed.error + reasons)
    return ToolError(str(failed))


def _next_or_error(events: Any) -> CheckEvent | ReceiptSummary:
    try:
        item: CheckEvent | ReceiptSummary = next(events)
    except Exception as failed:
        raise _tool_error(failed) from None
    return item


def serve(config: ClientConfig) -> None:
    anyio.run(build(config).run_stdio_async)
