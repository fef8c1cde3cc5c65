"""What the Flow-Next commands share: exit codes, the usage error, command leaves that print
`--json` or text, a gate command's arguments, and git run in the repository.

Exit codes: 0 yes/valid/done, 1 a clean "no", 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from forkhorse.flow import green

EXIT_YES = 0
EXIT_NO = 1
EXIT_ERROR = 2

Handler = Callable[[argparse.Namespace], int]
type Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


class UsageError(Exception):
    """Bad input or environment: the command exits 2."""


def group(subparsers: Subparsers, name: str, text: str) -> Subparsers:
    parser = subparsers.add_parser(name, help=text, description=text)
    return parser.add_subparsers(dest=f"{name}_command", required=True)


def leaf(parent: Subparsers, name: str, text: str, handler: Handler) -> argparse.ArgumentParser:
    parser = parent.add_parser(name, help=text, description=text)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=guarded(handler))
    return parser


def guarded(handler: Handler) -> Handler:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (UsageError, OSError, subprocess.CalledProcessError) as exc:
            emit(args, {"error": str(exc)}, f"error: {exc}", stream=sys.stderr)
            return EXIT_ERROR

    return run


def emit(args: argparse.Namespace, payload: object, text: str, stream: Any = None) -> None:
    out = stream or sys.stdout
    print(json.dumps(payload, sort_keys=True) if args.json else text, file=out)


class GateAtHead(NamedTuple):
    """A gate command line in the repository: what its green receipt is for."""

    command: str
    root: Path
    head: str
    dirty: list[str]


def gate_arguments(parser: argparse.ArgumentParser) -> None:
    """`--id GATE COMMAND...`, what every `gate` command takes."""
    parser.add_argument("--id", required=True, dest="gate_id", metavar="GATE")
    parser.add_argument("command", metavar="COMMAND", nargs="+")


def gate_at_head(args: argparse.Namespace) -> GateAtHead:
    """The gate command of `args` in the repository of the current directory."""
    if not green.is_valid_gate_id(args.gate_id):
        raise UsageError(f"invalid gate id {args.gate_id!r}")
    command = args.command[0] if len(args.command) == 1 else shlex.join(args.command)
    root = repo_root()
    return GateAtHead(command, root, current_head(root), dirty_paths(root))


def repo_root() -> Path:
    return Path(git(Path.cwd(), "rev-parse", "--show-toplevel").decode().strip())


def current_head(root: Path) -> str:
    sha = git(root, "rev-parse", "--verify", "HEAD").decode().strip()
    if not green.is_full_sha(sha):
        raise UsageError(f"unexpected HEAD {sha!r}")
    return sha.lower()


def dirty_paths(root: Path) -> list[str]:
    status = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    return green.dirty_paths(status)


def git(cwd: Path, *args: str) -> bytes:
    try:
        completed = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except OSError as exc:
        raise UsageError(f"cannot run git: {exc}") from exc
    if completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip()
        raise UsageError(f"git {' '.join(args)}: {message}")
    return completed.stdout
