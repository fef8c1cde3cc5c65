"""`forkhorse gc`: collect a local home's unreferenced records and orphan chunks, and
repack each project's repositories pruning their unreachable objects, now; and the
periodic collector `forkhorse serve` runs while it serves (`start_collector`).

The periodic collector is what bounds a long-lived server's storage between restarts:
force-pushed-away data is removed once older than the grace period, and each fork's
storage charge is settled to what its refs keep (`adapters/git/quota.py`), so an agent
refused for its fork's quota can push again once its garbage is gone. It runs every
`ForkStorageLimits.collect_every_seconds` (FORKHORSE_GC_INTERVAL_SECONDS) with the
collector's grace period (FORKHORSE_GC_GRACE_SECONDS, default one hour), one collection
at a time, and logs one line per round.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from forkhorse.domain.limits import FORK_STORAGE
from forkhorse.ports.clock import Clock, SystemClock
from forkhorse.ports.git import PackCollector
from forkhorse.ports.store import Store
from forkhorse.runner.collector import DEFAULT_GRACE, Collection, collect
from forkhorse.wiring.local import open_home
from forkhorse.wiring.settings import LocalSettings

log = logging.getLogger(__name__)

INTERVAL_VARIABLE = "FORKHORSE_GC_INTERVAL_SECONDS"
GRACE_VARIABLE = "FORKHORSE_GC_GRACE_SECONDS"
# A stop waits this long for a round in progress, no more: the server's stop has its own
# bound (a round cut off by the exit leaves what a crash would, which the next start sweeps).
STOP_WAIT_SECONDS = 1.0


class PeriodicCollector:
    """One daemon thread that collects every `every` seconds until stopped."""

    def __init__(
        self,
        store: Store,
        packs: PackCollector,
        *,
        every: float,
        grace: timedelta,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._packs = packs
        self._every = every
        self._grace = grace
        self._clock = clock or SystemClock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="periodic-garbage-collection", daemon=True
        )
        self.rounds = 0

    def start(self) -> PeriodicCollector:
        self._thread.start()
        return self

    def stop(self, wait_seconds: float = STOP_WAIT_SECONDS) -> None:
        """No further round; wait a little for one in progress (the thread is a daemon)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(wait_seconds)

    def collect_once(self) -> Collection:
        collection = collect(self._store, self._clock.now(), self._grace, packs=self._packs)
        self.rounds += 1
        counts = collection.counts()
        log.info(
            "periodic garbage collection %d: %d records, %d orphan chunk sets, %d packs "
            "removed, %d git bytes reclaimed",
            self.rounds,
            counts["records"],
            counts["orphans"],
            counts["packs"],
            counts["bytesReclaimed"],
            extra={"collection": counts},
        )
        return collection

    def _run(self) -> None:
        while not self._stopping.wait(self._every):
            try:
                self.collect_once()
            except Exception:
                log.exception("periodic garbage collection failed; it runs again next round")


def start_collector(
    store: Store, packs: PackCollector, environ: Mapping[str, str] | None = None
) -> PeriodicCollector:
    """`forkhorse serve`'s periodic collector, started, with the environment's interval and
    grace period (positive seconds; others are ignored)."""
    values = os.environ if environ is None else environ
    every = _seconds(values.get(INTERVAL_VARIABLE), FORK_STORAGE.collect_every_seconds, 0.1)
    grace = _seconds(values.get(GRACE_VARIABLE), DEFAULT_GRACE.total_seconds(), 0.0)
    return PeriodicCollector(store, packs, every=every, grace=timedelta(seconds=grace)).start()


def _seconds(raw: str | None, default: float, least: float) -> float:
    """A number of seconds from the environment: at least `least` and finite, else the
    default."""
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if least <= value < float("inf") else default


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gc = subparsers.add_parser(
        "gc", help="remove unreferenced records and orphan chunks; repack and prune git data"
    )
    gc.add_argument(
        "--home",
        type=Path,
        default=Path(LocalSettings.from_environ().home),
        help="state directory (FORKHORSE_HOME; default .forkhorse-local)",
    )
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
