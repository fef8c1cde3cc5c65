"""`forkhorse gc`: collect a local home's unreferenced records and orphan chunks, and
repack each project's repositories pruning their unreachable objects, now.

`forkhorse serve` collects the same way by itself, at start and then every
FORKHORSE_GC_INTERVAL_SECONDS (`LocalSupervisor`), which bounds a long-lived server's
storage between restarts: force-pushed-away data goes once older than the grace period,
and each fork's storage charge is settled to what its refs keep (`adapters/git/quota.py`).
"""

from __future__ import annotations

import argparse
import logging
from datetime import timedelta

from forkhorse.ports.clock import SystemClock
from forkhorse.runner.upkeep.collector import DEFAULT_GRACE, collect
from forkhorse.wiring.local import add_home_argument, open_home

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gc = subparsers.add_parser(
        "gc", help="remove unreferenced records and orphan chunks; repack and prune git data"
    )
    add_home_argument(gc)
    gc.add_argument(
        "--grace-seconds",
        type=int,
        default=int(DEFAULT_GRACE.total_seconds()),
        help="keep anything written more recently than this (default 3600)",
    )
    gc.add_argument("--dry-run", action="store_true", help="print what would go; remove nothing")
    gc.set_defaults(func=_gc)


def _gc(args: argparse.Namespace) -> int:
    if args.grace_seconds < 0:
        print("forkhorse gc: --grace-seconds must not be negative")
        return 2
    state = open_home(args.home)
    if state is None:
        print(f"forkhorse gc: no Forkhorse state under {args.home}")
        return 2
    store, git = state
    try:
        grace = timedelta(seconds=args.grace_seconds)
        collection = collect(store, SystemClock().now(), grace, packs=git, dry_run=args.dry_run)
    finally:
        git.close()
        store.close()
    verb = "would remove" if args.dry_run else "removed"
    for line in collection.lines():
        print(f"{verb} {line}")
    print(f"{verb} {len(collection.records)} records, {len(collection.orphans)} orphan chunk sets")
    if not args.dry_run:
        print(f"reclaimed {collection.bytes_reclaimed} bytes of git data")
    return 0
