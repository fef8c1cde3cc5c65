"""`forkhorse verify`: check a Forkhorse envelope offline, with a public key.

Exit codes: 0 verified, 1 refused (the failing check is named), 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from securesystemslib.signer import Key

from forkhorse.attest.keys import UnreadableKey, load_keys
from forkhorse.attest.verify import Expected, Refused, Verified, verify_envelope
from forkhorse.domain.limits import ATTESTATION

EXIT_VERIFIED = 0
EXIT_REFUSED = 1
EXIT_ERROR = 2


class _Unreadable(Exception):
    """A file the command could not read: exit 2."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = subparsers.add_parser(
        "verify",
        help="verify a receipt or promotion attestation (a DSSE envelope) offline",
        description=__doc__,
    )
    verify.add_argument("envelope", metavar="ENVELOPE", type=Path)
    verify.add_argument(
        "--key", required=True, type=Path, help="a PEM public key, or GET /keys' JSON"
    )
    verify.add_argument("--commit", metavar="SHA", help="the commit the evidence must be about")
    verify.add_argument("--project", help="the project the evidence must be for")
    verify.add_argument(
        "--require-passed", action="store_true", help="refuse unless it passed on real evidence"
    )
    verify.add_argument(
        "--show-mocked", action="store_true", help="accept mocked evidence (to inspect it)"
    )
    verify.add_argument(
        "--input",
        action="append",
        default=[],
        type=Path,
        metavar="ENVELOPE",
        help="a receipt envelope a promotion's VSA must name among its inputs",
    )
    verify.add_argument("--json", action="store_true", help="print the statement as JSON")
    verify.set_defaults(func=run_verify)


def _read(path: Path, limit: int, what: str) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise _Unreadable(f"cannot read {what} {path}: {error.strerror}") from None
    if len(data) > limit:
        raise _Unreadable(f"{what} {path} is larger than {limit} bytes")
    return data


def run_verify(args: argparse.Namespace) -> int:
    try:
        keys = load_keys(_read(args.key, ATTESTATION.key_file_bytes, "key file"))
        inputs = tuple(_verified_input(path, keys, args) for path in args.input)
        data = _read(args.envelope, ATTESTATION.envelope_bytes, "envelope")
    except (_Unreadable, UnreadableKey) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except Refused as refused:
        print(f"refused: input {refused}", file=sys.stderr)
        return EXIT_REFUSED
    expected = Expected(
        commit=args.commit,
        project=args.project,
        require_passed=args.require_passed,
        show_mocked=args.show_mocked,
        inputs=inputs,
    )
    try:
        verified = verify_envelope(data, keys, expected)
    except Refused as refused:
        print(f"refused: {refused}", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(json.loads(verified.payload), indent=2, sort_keys=True))
    else:
        for line in verified.passed:
            print(f"ok  {line}")
        print("verified")
    return EXIT_VERIFIED


def _verified_input(path: Path, keys: list[Key], args: argparse.Namespace) -> Verified:
    """An input receipt must verify too (same key, same commit); mocked is its VSA's call."""
    data = _read(path, ATTESTATION.envelope_bytes, "input envelope")
    expected = Expected(commit=args.commit, project=args.project, show_mocked=True)
    return verify_envelope(data, keys, expected)
