"""The collector against both Stores: orphan chunks and unreferenced records go after the
grace period; referenced records, live runs' records and racing puts are never lost."""

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from forkhorse.domain.model import LedgerEntry, Promotion
from forkhorse.ports.git import PackCollection, ReachTooLarge
from forkhorse.ports.store import Store
from forkhorse.records import get_record, put_json, put_record
from forkhorse.runner.upkeep.collector import DEFAULT_GRACE, collect, collect_records

from tests.support.store import (
    COMMIT,
    T0,
    beyond_one_transaction,
    crash_before_manifest,
    final_summary,
    record,
    record_digest,
    seed_review,
)

AFTER_GRACE = T0 + DEFAULT_GRACE + timedelta(seconds=1)
LONG_AFTER = T0 + 3 * DEFAULT_GRACE
TTL = timedelta(seconds=30)


def test_orphan_chunks_go_after_the_grace_period_and_not_before(store: Store) -> None:
    digest = crash_before_manifest(store, record(generation="crashed", checks=6), T0)

    early = collect_records(store, T0 + DEFAULT_GRACE - timedelta(seconds=1))
    assert (early.records, early.orphans) == ([], [])
    assert collect_records(store, AFTER_GRACE, dry_run=True).orphans == [digest]

    collected = collect_records(store, AFTER_GRACE)
    assert (collected.records, collected.orphans) == ([], [digest])
    assert list(store.stale_records(LONG_AFTER)) == [], "no chunk or intent is left"
    rec = record(generation="crashed", checks=6)
    assert put_record(store, rec, LONG_AFTER) == digest, "the same bytes can be put again"
    assert get_record(store, digest) == rec


def test_referenced_records_survive_and_unreferenced_ones_go(store: Store) -> None:
    seed_review(store)
    attached = record(generation="g1")
    attached_digest = put_record(store, attached, T0)
    live = T0 + timedelta(seconds=5)
    assert store.attach(
        "r1", COMMIT, "g1", "review-created", attached_digest, final_summary(attached), live
    )
    receipt_digest = put_json(store, {"flow": "review receipt"}, T0)
    store.put_review_receipt("r1", receipt_digest)
    promoted = put_record(store, record(generation="promoted"), T0)
    ledgered = put_record(store, record(generation="ledgered"), T0)
    _promote(store, promoted, ledgered)
    unreferenced = put_record(store, record(generation="stale"), T0)

    collected = collect_records(store, LONG_AFTER)

    assert (collected.records, collected.orphans) == ([unreferenced], [])
    assert get_record(store, unreferenced) is None
    for kept in (attached_digest, receipt_digest, promoted, ledgered):
        assert store.get_record_chunks(kept) is not None, kept
    assert get_record(store, attached_digest) == attached


def _promote(store: Store, writing_digest: str, ledger_digest: str) -> None:
    """One done promotion whose ledger entry names `ledger_digest`, and one still writing
    with `writing_digest`."""
    token = store.acquire_lease("proj", "holder", TTL, T0)
    assert token is not None
    for promotion_id in ("done", "open"):
        promotion = Promotion(
            id=promotion_id, project_id="proj", review_id="r1", commit=COMMIT, started_at=T0
        )
        assert store.begin_promotion(promotion, token, T0)
        if promotion_id == "done":
            entry = LedgerEntry(
                project_id="proj",
                promotion_id="done",
                review_id="r1",
                commit=COMMIT,
                previous_head=None,
                digest=ledger_digest,
                promoted_at=T0,
            )
            assert store.settle_promotion("proj", "done", "done", entry, T0)
    assert store.arm_promotion("proj", "open", writing_digest, token, T0)


def test_a_running_execution_keeps_its_records_whatever_their_age(store: Store) -> None:
    seed_review(store)  # g1 runs from T0
    step_result = put_json(store, {"check": "quick result"}, T0 + timedelta(minutes=1))

    assert collect_records(store, LONG_AFTER).records == []
    store.invalidate_running(LONG_AFTER)  # the run ends without attaching it
    assert collect_records(store, LONG_AFTER).records == [step_result]


def _pausing_manifest(
    store: Store, chunks_written: threading.Barrier, collected: threading.Barrier
) -> Callable[..., Any]:
    """The store's manifest write, paused once between the chunks and the manifest."""
    real: Callable[..., Any] = store._write_manifest  # type: ignore[attr-defined]
    paused = threading.Event()

    def write_manifest(*args: object) -> Any:
        if not paused.is_set():
            paused.set()
            chunks_written.wait()
            collected.wait()
        return real(*args)

    return write_manifest


def _race(store: Store, put_at: datetime, collect: Callable[[], object]) -> tuple[str, object]:
    """Put a record in a thread, run `collect` while the put sits between its chunks and
    its manifest, then let the put finish."""
    rec = record(generation="g1", checks=8, log_bytes=30_000)
    chunks_written, collected = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)
    results: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        beyond_one_transaction(store, patch)
        patch.setattr(store, "_write_manifest", _pausing_manifest(store, chunks_written, collected))
        writer = threading.Thread(target=lambda: results.append(put_record(store, rec, put_at)))
        writer.start()
        chunks_written.wait()
        outcome = collect()
        collected.wait()
        writer.join(timeout=30)
    assert results == [record_digest(rec)], "the put finished"
    attach_at = put_at + timedelta(seconds=1)
    assert store.claim_packet("p1", "agent-1", TTL, attach_at) is not None  # renewed
    assert store.attach(
        "r1", COMMIT, "g1", "review-created", results[0], final_summary(rec), attach_at
    )
    assert get_record(store, results[0]) == rec, "whole, and verified by its digest"
    return results[0], outcome


def test_a_collection_during_a_runs_put_loses_nothing(store: Store) -> None:
    seed_review(store)
    put_at = T0 + timedelta(minutes=5)

    digest, outcome = _race(store, put_at, lambda: collect_records(store, LONG_AFTER))

    assert outcome == collect_records(store, T0), "the running execution kept everything"
    review = store.get_review("r1")
    assert review is not None
    assert review.execution is not None
    assert review.execution.digest == digest


def test_a_put_stalled_past_the_grace_period_still_ends_whole(store: Store) -> None:
    """The Store contract alone, without the running-execution rule: the collection takes
    the stalled put's chunks, and the put writes them again before its manifest."""
    seed_review(store)
    removed: list[int] = []

    def collect_everything() -> None:
        for stale in store.stale_records(LONG_AFTER):
            removed.append(store.delete_stale_record(stale.digest, LONG_AFTER).chunks)

    _race(store, T0, collect_everything)

    assert sum(removed) > 0, "the collection did take chunks of the unfinished put"


class _OneProjectTooLarge:
    """A PackCollector whose walk of `refused` is refused, as the hosts raise past the limit."""

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.asked: list[str] = []

    def collect_packs(self, project_id: str, *_args: Any, dry_run: bool) -> PackCollection:
        self.asked.append(project_id)
        if project_id == self.refused:
            raise ReachTooLarge("more than 2 objects are reachable")
        return PackCollection(["pack-a"], 10)


def test_a_project_too_large_to_walk_is_named_and_the_others_collected(store: Store) -> None:
    seed_review(store)
    store.create_project(store.get_project("proj").model_copy(update={"id": "big"}))  # type: ignore[union-attr]
    packs = _OneProjectTooLarge("big")
    collection = collect(store, T0 + 2 * DEFAULT_GRACE, packs=packs)
    assert sorted(packs.asked) == ["big", "proj"]
    assert collection.packs == {"proj": ["pack-a"]}
    assert collection.skipped == {"big": "more than 2 objects are reachable"}
    assert "skipped big: more than 2 objects are reachable" in collection.lines()
    assert collection.counts()["projectsSkipped"] == 1
