"""The agents' and owners' client commands: `forkhorse login | submit | status | wait |
review-receipts attach | projects | packets | approve | promote | settings | gate REVIEW |
mcp`, and the transparency log's `verify-log | witness` (`forkhorse.client.log_cli`).

Exit codes: 0 passed (or done), 1 failed (a failing receipt, or promote's exact 409),
2 infrastructure-error, timed-out or an unreachable service, 3 usage or authority errors,
4 the server's transparency log refused (the witness saw another history).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from forkhorse.client import config, gitpush, log_cli
from forkhorse.client.errors import (
    ApiError,
    ClientError,
    ServiceUnavailable,
    UsageError,
    WitnessRefused,
)
from forkhorse.client.exits import (
    DEFAULT_WAIT_SECONDS,
    EXIT_FAILED,
    EXIT_INFRASTRUCTURE,
    EXIT_LOG_REFUSED,
    EXIT_OF_OUTCOME,
    EXIT_PASSED,
    EXIT_USAGE,
)

if TYPE_CHECKING:
    from forkhorse.client import workflow
    from forkhorse.client.api import ForkhorseClient
    from forkhorse.client.follow import Progress


def _lazy(name: str) -> ModuleType:
    """`name`, executed on its first attribute access: parsing a command (and git's
    credential helper) never loads httpx, pydantic or the API's models."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    assert spec is not None
    assert spec.loader is not None
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


if not TYPE_CHECKING:
    workflow = _lazy("forkhorse.client.workflow")

type Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
REVIEW_GATE = "review-gate"
# The commands `register` adds (`forkhorse.cli` loads only this module for them).
COMMANDS = frozenset(
    {
        "login",
        "git-credential",
        "submit",
        "status",
        "wait",
        "review-receipts",
        "projects",
        "packets",
        "approve",
        "promote",
        "settings",
        REVIEW_GATE,
        "mcp",
    }
    | log_cli.COMMANDS
)


def register(subparsers: Subparsers) -> None:
    connection = _connection_options()
    login = subparsers.add_parser(
        "login", help="save a profile (URL and token) for the client commands"
    )
    login.add_argument("--url", required=True)
    login.add_argument(
        "--token-file", type=Path, help="the token's file (default: read from standard input)"
    )
    login.add_argument("--profile", default=config.DEFAULT_PROFILE)
    login.add_argument("--project", help="the project the commands use when none is named")
    login.set_defaults(func=_login)

    credential = subparsers.add_parser(
        "git-credential", help="git's credential helper (git runs it; answers the service's host)"
    )
    credential.add_argument("operation")
    credential.set_defaults(func=_git_credential)

    submit = _command(subparsers, "submit", "push HEAD to your fork and get a receipt", connection)
    submit.add_argument("--packet", required=True, help="the work packet (claimed if need be)")
    submit.add_argument("--fork", help="the fork's name (created when you have none)")
    submit.add_argument(
        "--follow-pushes", action="store_true", help="the review follows later pushes to the fork"
    )
    submit.add_argument("--force", action="store_true", help="force-push HEAD to the fork")
    submit.add_argument(
        "--checkout", type=Path, default=Path(), help="the git checkout (default: here)"
    )
    _wait_options(submit)
    submit.set_defaults(handler=_submit)

    status = _command(subparsers, "status", "projects, or one project's reviews", connection)
    status.set_defaults(handler=_status)

    wait = _command(subparsers, "wait", "follow a review's receipt until it settles", connection)
    wait.add_argument("review", metavar="REVIEW")
    _wait_options(wait)
    wait.set_defaults(handler=_wait)

    group = subparsers.add_parser("review-receipts", help="Flow-Next receipts on a review")
    receipts = group.add_subparsers(dest="review_receipts_command", required=True)
    attach = _command(receipts, "attach", "attach a Flow-Next receipt to a review", connection)
    attach.add_argument("review", metavar="REVIEW")
    attach.add_argument("file", metavar="FILE", type=Path)
    attach.set_defaults(handler=_attach)

    projects = _command(
        subparsers, "projects", "your projects (an owner's, or an agent's memberships)", connection
    )
    projects.set_defaults(handler=_projects)

    packets = _command(
        subparsers, "packets", "a project's packets and their claims, a page at a time", connection
    )
    packets.add_argument("packets_project", nargs="?", metavar="PROJECT")
    packets.add_argument("--cursor", help="a page's next (printed after a page that has more)")
    packets.add_argument("--limit", type=int, help="the page size (1 to 100, default 50)")
    packets.set_defaults(handler=_packets)

    approve = _command(subparsers, "approve", "approve a review's commit (owner)", connection)
    approve.add_argument("review", metavar="REVIEW")
    approve.add_argument("--commit", help="the commit to approve (default: the review's)")
    approve.add_argument("--accept-checks-change", action="store_true")
    approve.set_defaults(handler=_approve)

    promote = _command(subparsers, "promote", "promote a review's commit (owner)", connection)
    promote.add_argument("review", metavar="REVIEW")
    promote.add_argument("--commit", help="the commit to promote (default: the review's)")
    _wait_options(promote)
    promote.set_defaults(handler=_promote)

    settings = _command(subparsers, "settings", "a project's receipt mode (owner)", connection)
    settings.add_argument("--require-receipt", required=True, choices=("on", "off"))
    settings.set_defaults(handler=_settings)

    gate = _command(
        subparsers, REVIEW_GATE, "why approve or promote would be refused (owner)", connection
    )
    gate.add_argument("review", metavar="REVIEW")
    gate.set_defaults(handler=_gate)

    mcp = subparsers.add_parser(
        "mcp", parents=[connection], help="the MCP server for agents, over stdio"
    )
    mcp.set_defaults(func=_mcp)
    log_cli.register(subparsers)


def route(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """`forkhorse gate REVIEW` is the review gate; `gate check|run|receipt` stay Flow-Next's."""
    arguments = list(argv)
    if len(arguments) < 2 or arguments[0] != "gate" or arguments[1].startswith("-"):
        return arguments
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and "gate" in action.choices:
            flow_gate = action.choices["gate"]
            known = {
                name
                for sub in flow_gate._actions
                if isinstance(sub, argparse._SubParsersAction)
                for name in sub.choices
            }
            if arguments[1] not in known:
                arguments[0] = REVIEW_GATE
    return arguments


# --- parsing helpers ------------------------------------------------------------------------
def _connection_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--url", help=f"the service (or {config.URL_VARIABLE}, or the profile)")
    parent.add_argument(
        "--token-file", type=Path, help=f"a file holding the token (or {config.TOKEN_VARIABLE})"
    )
    parent.add_argument("--profile", help="the profile in ~/.config/forkhorse/config.toml")
    parent.add_argument("--project", help=f"the project (or {config.PROJECT_VARIABLE})")
    return parent


def _command(
    subparsers: Subparsers, name: str, text: str, connection: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=text, description=text, parents=[connection])
    parser.add_argument("--json", action="store_true", help="print the final summary as JSON")
    parser.set_defaults(func=_run)
    return parser


def _wait_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_WAIT_SECONDS, help="seconds to follow at most"
    )


def connect(args: argparse.Namespace) -> ForkhorseClient:
    from forkhorse.client.api import ForkhorseClient

    found = config.resolve(args.url, args.token_file, args.profile, args.project)
    return ForkhorseClient(found)


# --- running a command ----------------------------------------------------------------------
def _run(args: argparse.Namespace) -> int:
    """Every client command: configuration, the handler, and refusals mapped to exit codes
    with the service's own sentence (never the token)."""
    from forkhorse.client.follow import WaitTimedOut
    from forkhorse.responses import CHECKS_FAILED_BEFORE_PROMOTE

    try:
        with connect(args) as client:
            code: int = args.handler(args, client)
            return code
    except ApiError as refused:
        code = EXIT_FAILED if refused.error == CHECKS_FAILED_BEFORE_PROMOTE else EXIT_USAGE
        _fail(args, refused.body() | {"status": refused.status}, code)
        return code
    except UsageError as wrong:
        _fail(args, {"error": str(wrong)}, EXIT_USAGE)
        return EXIT_USAGE
    except WitnessRefused as refused:
        _fail(args, {"error": str(refused)}, EXIT_LOG_REFUSED)
        return EXIT_LOG_REFUSED
    except (ServiceUnavailable, WaitTimedOut, ClientError) as broken:
        _fail(args, {"error": str(broken)}, EXIT_INFRASTRUCTURE)
        return EXIT_INFRASTRUCTURE


def _fail(args: argparse.Namespace, body: dict[str, Any], code: int) -> None:
    if args.json:
        _print_json(body | {"exitCode": code})
    else:
        print(f"error: {body['error']}", file=sys.stderr)
        for reason in body.get("reasons") or ():
            print(f"  - {reason}", file=sys.stderr)


def _print_json(payload: Any) -> None:
    print(json.dumps(payload, indent=2, sort_keys=True))


def _progress(args: argparse.Namespace) -> Progress | None:
    from forkhorse.client.follow import Progress

    return None if args.json else Progress()


def _project(args: argparse.Namespace, client: ForkhorseClient) -> str:
    if client.config.project:
        return client.config.project
    raise UsageError(f"Name the project: pass --project or set {config.PROJECT_VARIABLE}.")


def _report_receipt(
    args: argparse.Namespace, client: ForkhorseClient, project: str, review: str, summary: Any
) -> int:
    outcome = workflow.outcome_summary(client, project, review, summary)
    if args.json:
        _print_json(outcome)
    else:
        print(f"{outcome['status']}  review {review}")
        print(f"digest  {outcome['digest'] or '(none)'}")
        print(f"console {outcome['console']}")
    return EXIT_OF_OUTCOME.get(summary.status, EXIT_INFRASTRUCTURE)


# --- handlers -------------------------------------------------------------------------------
def _login(args: argparse.Namespace) -> int:
    try:
        if args.token_file is not None:
            token = config.read_token_file(args.token_file)
        else:
            token = sys.stdin.readline(config.MAX_TOKEN_BYTES).strip()
        if not token:
            raise UsageError("No token: pass --token-file, or the token on standard input.")
        found = config.ClientConfig(args.url.rstrip("/"), token, args.project)
        path = config.save_profile(args.profile, found)
    except UsageError as wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    print(f"saved profile {args.profile} in {path}")
    return EXIT_PASSED


def _git_credential(args: argparse.Namespace) -> int:
    sys.stdout.write(gitpush.answer_credential(args.operation, sys.stdin.read(64 * 1024)))
    return EXIT_PASSED


def _submit(args: argparse.Namespace, client: ForkhorseClient) -> int:
    project = _project(args, client)
    done = workflow.submit(
        client,
        project,
        args.packet,
        args.checkout,
        fork_name=args.fork,
        follow_pushes=args.follow_pushes,
        force=args.force,
    )
    progress = _progress(args)
    if progress is not None:
        progress.line(f"review {done.review.id}: {done.commit[:12]} on fork {done.fork.name}")
    return _follow_receipt(args, client, project, done.review.id, progress)


def _wait(args: argparse.Namespace, client: ForkhorseClient) -> int:
    project = workflow.find_project(client, args.review, client.config.project)
    return _follow_receipt(args, client, project, args.review, _progress(args))


def _follow_receipt(
    args: argparse.Namespace,
    client: ForkhorseClient,
    project: str,
    review: str,
    progress: Progress | None,
) -> int:
    """The receipt once it settles; a wait that runs out still names the review (exit 2)."""
    from forkhorse.client.follow import WaitTimedOut

    try:
        summary = workflow.wait_receipt(client, project, review, progress, args.timeout)
    except WaitTimedOut as late:
        console = client.console_link(project, review)
        body = {"project": project, "review": review, "status": "wait-timed-out"}
        _fail(args, body | {"error": str(late), "console": console}, EXIT_INFRASTRUCTURE)
        if not args.json:
            print(f"  follow it: forkhorse wait {review}  ({console})", file=sys.stderr)
        return EXIT_INFRASTRUCTURE
    return _report_receipt(args, client, project, review, summary)


def _status(args: argparse.Namespace, client: ForkhorseClient) -> int:
    if not client.config.project:
        return _projects(args, client)
    state = client.state(client.config.project)
    if args.json:
        _print_json(state.model_dump(mode="json", by_alias=True))
        return EXIT_PASSED
    print(f"{state.project.name} ({state.project.id}) head {state.project.canonical_head}")
    for packet in state.packets:
        held = f"claimed until {packet.claim.expires_at}" if packet.claim else "unclaimed"
        print(f"packet {packet.id}  {packet.title}  {held}")
    for review in state.reviews:
        status = review.receipt.status if review.receipt else "no receipt"
        print(f"review {review.id}  {review.commit[:12]}  {status}")
    return EXIT_PASSED


def _projects(args: argparse.Namespace, client: ForkhorseClient) -> int:
    listed = client.list_projects()
    if args.json:
        _print_json(listed.model_dump(mode="json", by_alias=True))
        return EXIT_PASSED
    for project in listed.projects:
        mode = "required" if project.settings.require_receipt else "advisory"
        print(f"{project.id}  {project.name}  {mode}  head {project.canonical_head}")
    return EXIT_PASSED


def _packets(args: argparse.Namespace, client: ForkhorseClient) -> int:
    project = args.packets_project or _project(args, client)
    page = client.list_packets(project, args.cursor, args.limit)
    if args.json:
        _print_json(page.model_dump(mode="json", by_alias=True))
        return EXIT_PASSED
    for packet in page.packets:
        claim = packet.claim
        held = f"claimed by {claim.agent_id} until {claim.expires_at}" if claim else "free"
        print(f"{packet.id}  {packet.title}  {held}")
    if page.next:
        print(f"more: forkhorse packets {project} --cursor {page.next}")
    return EXIT_PASSED


def _attach(args: argparse.Namespace, client: ForkhorseClient) -> int:
    from forkhorse.domain.limits import API_INPUT

    project = workflow.find_project(client, args.review, client.config.project)
    try:
        with args.file.open("rb") as handle:
            raw = handle.read(API_INPUT.body_bytes + 1)
        receipt = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise UsageError(f"Cannot read a JSON receipt from {args.file}: {exc}.") from None
    if len(raw) > API_INPUT.body_bytes or not isinstance(receipt, dict):
        raise UsageError(f"{args.file} is not one JSON object within the body limit.")
    stored = client.add_review_receipt(project, args.review, receipt)
    if args.json:
        _print_json(stored.model_dump(mode="json", by_alias=True))
    else:
        print(f"attached {stored.digest}")
    return EXIT_PASSED


def _approve(args: argparse.Namespace, client: ForkhorseClient) -> int:
    project = workflow.find_project(client, args.review, client.config.project)
    commit = args.commit or client.review(project, args.review).commit
    approved = client.approve(project, args.review, commit, args.accept_checks_change)
    if args.json:
        _print_json(approved.model_dump(mode="json", by_alias=True))
    else:
        print(f"approved {commit} ({approved.approval.mode})")
    return EXIT_PASSED


def _promote(args: argparse.Namespace, client: ForkhorseClient) -> int:
    project = workflow.find_project(client, args.review, client.config.project)
    outcome = workflow.promote(
        client, project, args.review, args.commit, _progress(args), args.timeout
    )
    if outcome.status != 200:
        raise ApiError.from_body(outcome.status, outcome.body)
    promotion = outcome.body["promotion"]
    if args.json:
        _print_json(outcome.body)
    else:
        print(f"promoted {promotion['from']} -> {promotion['to']}")
        print(f"digest  {promotion['digest']}")
        print(f"promotion {promotion['id']}")
        for name, path in sorted(promotion["links"].items()):
            print(f"{name}  {client.config.url}{path}")
    return EXIT_PASSED


def _settings(args: argparse.Namespace, client: ForkhorseClient) -> int:
    project = _project(args, client)
    answer = client.set_settings(project, args.require_receipt == "on")
    if args.json:
        _print_json(answer.model_dump(mode="json", by_alias=True))
    else:
        mode = "required" if answer.settings.require_receipt else "advisory"
        print(f"receipts {mode}")
    return EXIT_PASSED


def _gate(args: argparse.Namespace, client: ForkhorseClient) -> int:
    project = workflow.find_project(client, args.review, client.config.project)
    gate = client.gate(project, args.review)
    if args.json:
        _print_json(gate.model_dump(mode="json", by_alias=True))
    else:
        print(f"{gate.mode} gate for {gate.commit}")
        for action, verdict in (("approve", gate.approve), ("promote", gate.promote)):
            print(f"{action}: {'allowed' if verdict.allowed else 'refused'}")
            for reason in verdict.reasons:
                print(f"  - {reason}")
    return EXIT_PASSED


def _mcp(args: argparse.Namespace) -> int:
    from forkhorse.client import mcp_server  # the SDK loads only for this command

    try:
        found = config.resolve(args.url, args.token_file, args.profile, args.project)
    except UsageError as wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    mcp_server.serve(found)
    return EXIT_PASSED
