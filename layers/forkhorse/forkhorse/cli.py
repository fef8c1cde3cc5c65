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

# Modules exposing `register(subparsers)`; each adds its subcommands and sets `func`.
COMMAND_MODULES: tuple[str, ...] = (
    "forkhorse.flow.cli",
    "forkhorse.serve",
    "forkhorse.cli_image",
    "forkhorse.gc",
    "forkhorse.client.cli",
    "forkhorse.attest.cli",
    "forkhorse.signing_keys",
)


class ClientParser(argparse.ArgumentParser):
    """A client command's parser: a usage error exits 3, as the README's exit codes say
    (argparse's own is 2, the client's code for an infrastructure error)."""

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


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser: argparse.ArgumentParser | None = None
    if not (arguments and arguments[0] in client_cli.COMMANDS):
        parser = build_parser()
        arguments = client_cli.route(parser, arguments)  # `gate REVIEW` is `review-gate`
    if arguments and arguments[0] in client_cli.COMMANDS:
        # An agent's command (or git's credential helper) loads only the client: it starts fast.
        parser = build_parser(("forkhorse.client.cli",), ClientParser)
    assert parser is not None
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
