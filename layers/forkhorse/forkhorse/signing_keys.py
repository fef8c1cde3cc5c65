"""`forkhorse keys list|rotate`: the local home's signing keys.

`list` prints the public keys (PEM, with ids) a verifier needs; `rotate` makes a new key the
signing one (after the server restarts), keeping the old public key listed. Private keys are
never printed. Exit codes: 0 done, 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from forkhorse.wiring.local import local_public_keys, rotate_local_key
from forkhorse.wiring.settings import LocalSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = subparsers.add_parser("keys", help="the local signing keys", description=__doc__)
    actions = keys.add_subparsers(dest="keys_command", required=True)
    home = Path(LocalSettings.from_environ().home)
    for name, handler, text in (
        ("list", _list, "print the public keys with their ids"),
        ("rotate", _rotate, "make a new signing key; old keys stay listed"),
    ):
        leaf = actions.add_parser(name, help=text)
        leaf.add_argument("--home", type=Path, default=home, help="the local state directory")
        leaf.set_defaults(func=handler)


def _list(args: argparse.Namespace) -> int:
    listed = local_public_keys(args.home.resolve())
    if not listed:
        message = f"error: {args.home} has no signing keys yet (start the server once)"
        print(message, file=sys.stderr)
        return 2
    for keyid, pem, current in listed:
        print(f"# keyid {keyid}{' (current)' if current else ''}")
        print(pem.strip())
    return 0


def _rotate(args: argparse.Namespace) -> int:
    try:
        keyid = rotate_local_key(args.home.resolve())
    except FileNotFoundError as missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    print(f"new signing key {keyid}; restart the server for it to sign")
    return 0
