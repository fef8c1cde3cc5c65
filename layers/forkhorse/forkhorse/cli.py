"""The `forkhorse` command. Each capability registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from forkhorse.client import cli as client_cli

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


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forkhorse", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in client_cli.COMMANDS:
        # An agent's command (or git's credential helper) loads only the client: it starts fast.
        parser = build_parser(("forkhorse.client.cli",))
    else:
        parser = build_parser()
        arguments = client_cli.route(parser, arguments)
    args = parser.parse_args(arguments)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
