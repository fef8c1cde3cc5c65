"""Garbage collection: records nothing references, chunks no manifest names, and pack data
no ref reaches (S3 packs on AWS; locally, each project's repositories are repacked and
pruned), each only once older than a grace period.

Safety against live writers comes from three rules. Anything written (or, for a record
put again, touched) within the grace period is kept. Anything written since the oldest
still-running execution started is kept, however long that run takes. And the Store's
put/delete contract keeps a record whole or absent when a put races a deletion.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from forkhorse.domain.limits import FORK_STORAGE
from forkhorse.domain.model import Project, Review
from forkhorse.domain.receipts import parse_timestamp
from forkhorse.ports.git import PackCollector, ReachTooLarge
from forkhorse.ports.store import Store

DEFAULT_GRACE = timedelta(seconds=FORK_STORAGE.collect_grace_seconds)


@dataclass
class Collection:
    """What one collection removed (or, in a dry run, would remove)."""

    records: list[str] = field(default_factory=list)  # unreferenced records, by digest
    orphans: list[str] = field(default_factory=list)  # digests whose manifest-less chunks went
    packs: dict[str, list[str]] = field(default_factory=dict)  # project -> pack names
    bytes_reclaimed: int = 0  # by the packs' collection (net of consolidated packs)
    skipped: dict[str, str] = field(default_factory=dict)  # project -> why its packs were kept

    def counts(self) -> dict[str, int]:
        return {
            "records": len(self.records),
            "orphans": len(self.orphans),
            "packs": sum(len(names) for names in self.packs.values()),
            "bytesReclaimed": self.bytes_reclaimed,
            "projectsSkipped": len(self.skipped),
        }

    def lines(self) -> list[str]:
        return (
            [f"record {digest}" for digest in self.records]
            + [f"orphan chunks {digest}" for digest in self.orphans]
            + [f"pack {project} {name}" for project, names in self.packs.items() for name in names]
            + [f"skipped {project}: {why}" for project, why in self.skipped.items()]
        )


@dataclass
class _Scan:
    """One pass over every review: the digests anything references, and live runs' starts."""

    referenced: set[str] = field(default_factory=set)
    running_since: list[datetime] = field(default_factory=list)

    def add_review(self, store: Store, review: Review) -> None:
        execution = review.execution
        if execution is not None:
            self._keep(execution.digest)
            if execution.is_running:
                self.running_since.append(parse_timestamp(execution.summary.started_at))
        if review.approval is not None:
            self._keep(review.approval.digest)
        self.referenced.update(store.list_review_receipts(review.id))

    def add_project(self, store: Store, project: Project) -> None:
        for review in store.list_reviews(project.id):
            self.add_review(store, review)
        for promotion in store.list_promotions(project.id):
            self._keep(promotion.digest)
        for entry in store.ledger(project.id):
            self._keep(entry.digest)

    def _keep(self, digest: str | None) -> None:
        if digest is not None:
            self.referenced.add(digest)


def _scan(store: Store) -> _Scan:
    scan = _Scan()
    for project in store.list_projects():
        scan.add_project(store, project)
    return scan


def record_cutoff(now: datetime, grace: timedelta, running_since: Iterable[datetime]) -> datetime:
    """Collect only what was written before this: past the grace period, and before the
    oldest running execution started (its step results and record are not attached yet)."""
    return min([now - grace, *running_since])


def collect_records(
    store: Store, now: datetime, grace: timedelta = DEFAULT_GRACE, *, dry_run: bool = False
) -> Collection:
    # References are read before the stale listing: a record referenced later was put
    # (or touched) after this point, so it is newer than the cutoff.
    scan = _scan(store)
    cutoff = record_cutoff(now, grace, scan.running_since)
    collection = Collection()
    for stale in store.stale_records(cutoff):
        if stale.digest in scan.referenced:
            continue
        found = collection.records if stale.has_manifest else collection.orphans
        if dry_run or store.delete_stale_record(stale.digest, cutoff).removed:
            found.append(stale.digest)
    return collection


def _collect_packs(
    store: Store,
    packs: PackCollector,
    collection: Collection,
    cutoff: datetime,
    *,
    dry_run: bool,
) -> None:
    """Every project's unreachable pack data; reviews' commits count as tips too, so a
    review whose fork ref moved away keeps its commit readable."""
    for project in store.list_projects():
        forks = [fork.id for fork in store.list_forks(project.id)]
        reviews = store.list_reviews(project.id)
        tips = {review.commit for review in reviews} | {
            review.execution.commit for review in reviews if review.execution is not None
        }
        try:
            found = packs.collect_packs(project.id, forks, tips, cutoff, dry_run=dry_run)
        except ReachTooLarge as refused:  # one huge project must not stop the others
            collection.skipped[project.id] = str(refused)
            continue
        if found.packs:
            collection.packs[project.id] = found.packs
        collection.bytes_reclaimed += found.bytes_reclaimed


def collect(
    store: Store,
    now: datetime,
    grace: timedelta = DEFAULT_GRACE,
    *,
    packs: PackCollector | None = None,
    dry_run: bool = False,
) -> Collection:
    """The whole collection: records and orphan chunks, then pack data when the git host
    keeps packs (S3)."""
    collection = collect_records(store, now, grace, dry_run=dry_run)
    if packs is not None:
        _collect_packs(store, packs, collection, now - grace, dry_run=dry_run)
    return collection
