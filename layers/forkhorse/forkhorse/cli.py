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
    "forkhorse.adapters.containers.cli",
    "forkhorse.gc",
    "forkhorse.client.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forkhorse", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(client_cli.route(parser, arguments))
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
