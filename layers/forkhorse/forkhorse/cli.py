"""The `forkhorse` command. Each capability registers its own subcommands.

Registering a command imports only its light module; what a command runs (the service,
boto3, dulwich, httpx) loads inside its handler. `forkhorse` is git's credential helper, so
`git-credential` and the other client commands build a parser of the client's alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import typing
from collections.abc import Sequence

from forkhorse.client import cli as client_cli
from forkhorse.client.exits import CLIENT_EXTRA, EXIT_USAGE

# What `pip install 'forkhorse[client]'` adds: without them the client commands say so.
CLIENT_MODULES = frozenset({"httpx", "mcp"})

# Modules exposing `register(subparsers)`; each adds the subcommands named here and sets
# `func` (a unit test keeps the names equal to what each module registers). A command line
# naming one of them imports that module alone; `forkhorse --help` imports them all.
COMMANDS_OF: dict[str, frozenset[str]] = {
    "forkhorse.flow.cli": frozenset(
        {"receipt", "findings", "gate", "review-findings", "qa", "triage-skip", "criteria"}
    ),
    "forkhorse.serve": frozenset({"serve", "demo"}),
    "forkhorse.cli_image": frozenset({"image"}),
    "forkhorse.gc": frozenset({"gc"}),
    "forkhorse.log_check": frozenset({"log-check"}),
    "forkhorse.client.cli": client_cli.COMMANDS,
    "forkhorse.attest.cli": frozenset({"verify"}),
    "forkhorse.signing_keys": frozenset({"keys"}),
}
COMMAND_MODULES: tuple[str, ...] = tuple(COMMANDS_OF)
CLIENT_COMMANDS = ("forkhorse.client.cli",)


class ClientParser(argparse.ArgumentParser):
    """A client command's parser: a usage error exits 3, as the exit codes in
    docs/api-and-clients.md say (argparse's own is 2, the client's infrastructure error)."""

    def error(self, message: str) -> typing.NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser(
    modules: Sequence[str] = COMMAND_MODULES,
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    parser = parser_class(prog="forkhorse", description=__doc__.split("\n\n")[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def _parser_for(arguments: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the one module that registers the command named, or of them all."""
    command = arguments[0] if arguments else None
    if command in client_cli.COMMANDS:
        # Imports nothing more (the client's module is loaded above, for COMMANDS and `route`);
        # ClientParser gives a usage error the client's exit code, 3.
        return build_parser(CLIENT_COMMANDS, ClientParser)
    owners = [name for name, commands in COMMANDS_OF.items() if command in commands]
    return build_parser(owners if len(owners) == 1 else COMMAND_MODULES)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = _parser_for(arguments)
    routed = client_cli.route(parser, arguments)  # `gate REVIEW` is `review-gate`
    if routed != arguments:
        arguments, parser = routed, _parser_for(routed)
    args = parser.parse_args(arguments)
    try:
        code: int = args.func(args)
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] not in CLIENT_MODULES:
            raise
        print(
            f"error: forkhorse {arguments[0]} needs the client extra ({missing.name} is not"
            f" installed): {CLIENT_EXTRA}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
