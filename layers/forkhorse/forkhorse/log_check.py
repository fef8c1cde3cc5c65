"""`forkhorse log-check`: check a local home's transparency log now, as an auditor would
(the checkpoint's signature, its tiles against its root, every entry against the ledger's
row and the envelope it names), and keep the report the console shows.

`forkhorse serve` runs the same check incrementally at start and after each periodic
collection; `--full` checks from the first entry, not from the last size found sound.
"""

from __future__ import annotations

import argparse
import json

from forkhorse.wiring.local import add_home_argument, open_log_check


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = subparsers.add_parser(
        "log-check", help="check a local home's transparency log against its ledger and store"
    )
    add_home_argument(check)
    check.add_argument("--full", action="store_true", help="check every entry, not only new ones")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    self_check = open_log_check(args.home)
    if self_check is None:
        print(f"forkhorse log-check: no transparency log under {args.home}")
        return 2
    try:
        report = self_check.run(full=args.full)
    finally:
        self_check.ledger.close()  # type: ignore[attr-defined]
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        verdict = "sound" if report["ok"] else "NOT sound"
        print(f"log of size {report['size']} (ledger {report['ledgerSize']}): {verdict}")
        print(f"root {report['root']}")
        for problem in report["problems"]:
            print(f"problem: {problem}")
    return 0 if report["ok"] else 1
