"""`forkhorse verify-log` and `forkhorse witness show|forget|pin`: the transparency log from
the client's side (docs/transparency-log.md).

Parsing them loads nothing heavy (git's credential helper builds this parser too); the
handlers load httpx, the domain and cryptography. Exit codes: 0 all holds, 1 findings (a
commit or an entry the log does not explain), 2 the log or git could not be read, 3 usage,
4 the log itself is refused (signature, tiles, consistency, inclusion).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forkhorse.client import config
from forkhorse.client.errors import ClientError, ServiceUnavailable, UsageError
from forkhorse.client.exits import (
    EXIT_FAILED,
    EXIT_INFRASTRUCTURE,
    EXIT_LOG_REFUSED,
    EXIT_PASSED,
    EXIT_USAGE,
)

if TYPE_CHECKING:
    from forkhorse.client.verify_log import LogReport, ProjectCheck
    from forkhorse.client.witness import LogWitness, Pin
    from forkhorse.domain.checkpoint import Checkpoint
    from forkhorse.tlog.verify import LogKey, LogSource

type Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
type Handler = Callable[[argparse.Namespace], int]
COMMANDS = frozenset({"verify-log", "witness"})
LOG_SUFFIX = "/log"


def register(subparsers: Subparsers) -> None:
    text = "check a server's transparency log and a project's canonical against it, offline"
    verify = subparsers.add_parser("verify-log", help=text, description=text)
    verify.add_argument(
        "--log",
        metavar="URL-or-DIR",
        help="the log's files: its URL (https://host/log) or a directory holding `checkpoint` "
        "and `tile/` (default: the configured service's /log)",
    )
    verify.add_argument(
        "--key",
        type=Path,
        metavar="FILE",
        help="the log's public key: the JSON of GET /log/key, or a PEM with --origin "
        "(default: the key the witness pinned for the service)",
    )
    verify.add_argument("--origin", help="the log's name (its checkpoints' first line)")
    verify.add_argument(
        "--state",
        type=Path,
        metavar="FILE",
        help="the checkpoint this verifier saw last: the log must append to it; replaced "
        "after a log that holds",
    )
    selectors = verify.add_argument_group("entries to prove included")
    selectors.add_argument("--entry", type=int, action="append", default=[], metavar="INDEX")
    selectors.add_argument("--subject", action="append", default=[], help="any subject value")
    selectors.add_argument("--commit", action="append", default=[])
    selectors.add_argument("--promotion", action="append", default=[])
    audit = verify.add_argument_group("a project's canonical against the log")
    clones = audit.add_mutually_exclusive_group()
    clones.add_argument("--repo", type=Path, help="a clone of the project's canonical")
    clones.add_argument("--clone", metavar="URL", help="canonical's clone URL (cloned bare)")
    audit.add_argument("--ref", help="canonical's ref in --repo (default: origin/main, or main)")
    _config_options(verify)
    verify.add_argument("--project", help=f"the project to audit (or {config.PROJECT_VARIABLE})")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.set_defaults(func=_guarded(_verify_log))

    witness = subparsers.add_parser(
        "witness", help="the log keys and checkpoints this client pinned, per server"
    )
    actions = witness.add_subparsers(dest="witness_command", required=True)
    show = _witness_action(actions, "show", "list each server's pinned key and checkpoint")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_guarded(_witness_show))
    forget = _witness_action(actions, "forget", "drop a server's pin (re-pinned on next use)")
    forget.set_defaults(func=_guarded(_witness_forget))
    pin = _witness_action(actions, "pin", "pin a server's log key explicitly")
    pin.add_argument("--key", type=Path, required=True, metavar="FILE", help="/log/key or a PEM")
    pin.add_argument("--origin", help="the log's name, with a PEM key")
    pin.set_defaults(func=_guarded(_witness_pin))


def _config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=f"the service (or {config.URL_VARIABLE}, or the profile)")
    parser.add_argument("--profile", help="the profile in ~/.config/forkhorse/config.toml")


def _witness_action(actions: Subparsers, name: str, text: str) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=text, description=text)
    parser.add_argument("--server", metavar="URL", help="the service (default: the configured)")
    parser.add_argument(
        "--state",
        type=Path,
        metavar="FILE",
        help=f"the witness's file (or {config.WITNESS_STATE_VARIABLE}; default beside the "
        "profiles)",
    )
    _config_options(parser)
    return parser


def _guarded(handler: Handler) -> Handler:
    """`handler` with the client's errors as exit codes and one line on stderr."""

    def run(args: argparse.Namespace) -> int:
        try:
            code = handler(args)
        except UsageError as wrong:
            return _fail(args, str(wrong), EXIT_USAGE)
        except (ServiceUnavailable, ClientError) as broken:
            return _fail(args, str(broken), EXIT_INFRASTRUCTURE)
        return code

    return run


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"error": message, "exitCode": code}, indent=2, sort_keys=True))
    else:
        print(f"error: {message}", file=sys.stderr)
    return code


# --- verify-log -------------------------------------------------------------------------------
def _verify_log(args: argparse.Namespace) -> int:
    from forkhorse.client.verify_log import Selection, Verification, remember, summary

    url, project = config.configured(args.url, args.profile, args.project)
    where = args.log or (url + LOG_SUFFIX if url else None)
    if where is None:
        variable = config.URL_VARIABLE
        raise UsageError(f"Name the log: pass --log URL-or-DIR, or --url (or {variable}).")
    key, pin = _log_key(args, where, url)
    previous, previous_from = _previous(args, key, pin)
    selection = Selection(
        tuple(args.entry), tuple(args.subject), tuple(args.commit), tuple(args.promotion)
    )
    with contextlib.ExitStack() as stack:
        source = _source(where, stack)
        projects = _projects(args, project, stack)
        verification = Verification(source, where, key, previous, previous_from)
        report, note = verification.run(selection, projects)
    if report.refused is None and args.state is not None:
        remember(args.state, key.origin, note)
    code = _exit_code(report)
    if args.json:
        print(json.dumps(report.to_json() | {"exitCode": code}, indent=2, sort_keys=True))
    else:
        print("\n".join(summary(report)))
    return code


def _exit_code(report: LogReport) -> int:
    if report.refused is not None:
        return EXIT_LOG_REFUSED
    return EXIT_FAILED if report.every_finding else EXIT_PASSED


def _source(where: str, stack: contextlib.ExitStack) -> LogSource:
    from forkhorse.client.log_source import DirectoryLogSource, HttpLogSource

    if where.startswith(("http://", "https://")):
        http = HttpLogSource.at(where)
        stack.callback(http.close)
        return http
    if not Path(where).is_dir():
        raise UsageError(f"--log {where} is neither an http(s) URL nor a directory.")
    return DirectoryLogSource(Path(where))


def _witness(path: Path | None = None) -> LogWitness:
    from forkhorse.client.witness import LogWitness, WitnessState

    return LogWitness(WitnessState(path or config.witness_path()))


def _log_key(args: argparse.Namespace, where: str, url: str | None) -> tuple[LogKey, Pin | None]:
    from forkhorse.client.verify_log import read_key
    from forkhorse.client.witness import server_key

    if args.key is not None:
        return read_key(args.key, args.origin), None
    server = where.removesuffix("/").removesuffix(LOG_SUFFIX) if "://" in where else url
    pin = None if server is None else _witness().pins().get(server_key(server))
    if pin is None:
        raise UsageError(
            "No key for the log: pass --key FILE (save GET <service>/log/key), or let the "
            "witness pin it first (any client command against the service)."
        )
    return pin.key, pin


def _previous(
    args: argparse.Namespace, key: LogKey, pin: Pin | None
) -> tuple[Checkpoint | None, str | None]:
    from forkhorse.client.verify_log import read_state

    if args.state is not None:
        return read_state(args.state, key.origin), str(args.state)
    if pin is not None and pin.checkpoint is not None:
        return pin.tree(), "the witness's pin"
    return None, None


def _projects(
    args: argparse.Namespace, project: str | None, stack: contextlib.ExitStack
) -> list[ProjectCheck]:
    from forkhorse.client.git_history import clone_canonical, open_history
    from forkhorse.client.verify_log import ProjectCheck

    if args.repo is None and args.clone is None:
        return []
    if project is None:
        raise UsageError(f"Name the project to audit: --project (or {config.PROJECT_VARIABLE}).")
    if args.repo is not None:
        return [ProjectCheck(project, open_history(args.repo, args.ref), str(args.repo))]
    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="forkhorse-audit-")))
    env = {name: value for name, value in _helper_env(args).items() if value}
    repo = clone_canonical(args.clone, scratch / "canonical.git", env)
    return [ProjectCheck(project, open_history(repo, args.ref), args.clone)]


def _helper_env(args: argparse.Namespace) -> dict[str, str | None]:
    """What the credential helper git runs needs to find the profile this command used."""
    return {config.URL_VARIABLE: args.url, config.PROFILE_VARIABLE: args.profile}


# --- witness ----------------------------------------------------------------------------------
def _server(args: argparse.Namespace) -> str | None:
    url, _ = config.configured(args.server or args.url, args.profile)
    return url


def _witness_show(args: argparse.Namespace) -> int:
    from forkhorse.client.witness import server_key

    witness = _witness(args.state)
    pins = witness.pins()
    if args.server is not None:
        pins = {k: v for k, v in pins.items() if k == server_key(args.server)}
    shown = {server: _pin_json(pin) for server, pin in sorted(pins.items())}
    if args.json:
        body = {"state": str(witness.state.path), "servers": shown}
        print(json.dumps(body, indent=2, sort_keys=True))
        return EXIT_PASSED
    if not shown:
        print(f"no server pinned in {witness.state.path}")
    for server, pin in shown.items():
        print(server)
        print(f"  log {pin['origin']}  key ID {pin['keyId']}")
        print(f"  pinned {pin['pinnedAt']} ({pin['how']})")
        verified = (
            f"size {pin['size']}, root {pin['root']}, verified {pin['verifiedAt']}"
            if pin["size"] is not None
            else "none verified yet"
        )
        print(f"  checkpoint {verified}")
    return EXIT_PASSED


def _pin_json(pin: Pin) -> dict[str, Any]:
    tree = pin.tree()
    return pin.to_json() | {
        "size": None if tree is None else tree.size,
        "root": None if tree is None else tree.root.hex(),
    }


def _witness_forget(args: argparse.Namespace) -> int:
    from forkhorse.client.log_source import key_hex

    server = _required_server(args)
    forgotten = _witness(args.state).forget(server)
    if forgotten is None:
        print(f"nothing pinned for {server}")
        return EXIT_PASSED
    print(
        f"forgot {server}: log {forgotten.key.origin}, key ID {key_hex(forgotten.key)}; the "
        "next call trusts the key the server names then"
    )
    return EXIT_PASSED


def _witness_pin(args: argparse.Namespace) -> int:
    from forkhorse.client.log_source import key_hex
    from forkhorse.client.verify_log import read_key

    server = _required_server(args)
    key = read_key(args.key, args.origin)
    _witness(args.state).pin(server, key)
    print(f"pinned {server}: log {key.origin}, key ID {key_hex(key)}")
    return EXIT_PASSED


def _required_server(args: argparse.Namespace) -> str:
    server = _server(args)
    if server is None:
        raise UsageError(f"Name the server: --server URL (or {config.URL_VARIABLE}).")
    return server
