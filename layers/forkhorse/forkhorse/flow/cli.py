"""`forkhorse receipt|findings|gate|review-findings|qa|triage-skip|criteria`: Flow-Next
receipts from the command line.

`check_cli` reads and checks receipts, `producer_cli` writes them; `gate` holds commands of
both. Exit codes: 0 yes/valid, 1 no/invalid, 2 usage or I/O error. `--json` prints machine
output.
"""

from __future__ import annotations

from forkhorse.flow import check_cli, producer_cli
from forkhorse.flow.cli_support import Subparsers


def register(subparsers: Subparsers) -> None:
    """Add the Flow-Next command groups."""
    gate = check_cli.register(subparsers)
    producer_cli.register(subparsers, gate)
