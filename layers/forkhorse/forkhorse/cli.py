"""The `forkhorse` command. Each capability registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules exposing `register(subparsers)`; each adds its subcommands and sets `func`.
COMMAND_MODULES: tuple[str, ...] = (
    "forkhorse.flow.cli",
    "forkhorse.serve",
    "forkhorse.adapters.containers.cli",
    "forkhorse.gc",
    "forkhorse.attest.cli",
    "forkhorse.signing_keys",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forkhorse", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
