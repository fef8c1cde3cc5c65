"""A crash at every write of a record put, on both Stores (issue 30, item 6).

A record whose chunks and manifest fit one transaction (100 items, 4 MB: DynamoDB's
TransactWriteItems) is written in that one transaction, so any crash leaves it whole or
absent and no chunk without a manifest. A larger record takes the intent, chunks, manifest
path: a crash there can leave orphan chunks (or an intent), and the collector removes every
one of them after its grace period. The crash is raised before or after each write the Store
makes (SQLite: each write transaction; DynamoDB: each write call of its client).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.domain.canonical import CHUNK_BYTES
from forkhorse.ports.store import Store
from forkhorse.ports.store.records import fits_one_transaction
from forkhorse.records import digest_and_chunks, get_record, put_record
from forkhorse.runner.upkeep.collector import DEFAULT_GRACE, collect_records

from tests.support.store import T0, beyond_one_transaction, record, record_digest

LONG_AFTER = T0 + 3 * DEFAULT_GRACE
FAR_FUTURE = T0 + 100 * DEFAULT_GRACE
DYNAMODB_WRITES = (
    "put_item",
    "update_item",
    "delete_item",
    "batch_write_item",
    "transact_write_items",
)


class PowerCut(Exception):
    pass


class WriteCounter:
    """Counts the Store's writes, and crashes before or after the one numbered `at`."""

    def __init__(self, at: int | None = None, phase: str = "before") -> None:
        self.count = 0
        self.at = at
        self.phase = phase

    def before(self) -> int:
        index = self.count
        self.count += 1
        if index == self.at and self.phase == "before":
            raise PowerCut(f"before write {index}")
        return index

    def after(self, index: int) -> None:
        if index == self.at and self.phase == "after":
            raise PowerCut(f"after write {index}")


def _intercept(store: Store, patch: pytest.MonkeyPatch, counter: WriteCounter) -> None:
    if isinstance(store, SqliteStore):
        real_write = store._write

        @contextmanager
        def write() -> Iterator[Any]:
            index = counter.before()
            with real_write() as conn:
                yield conn
            counter.after(index)  # committed

        patch.setattr(store, "_write", write)
        return
    client = store._client  # type: ignore[attr-defined]
    for name in DYNAMODB_WRITES:
        real: Callable[..., Any] = getattr(client, name)

        def call(*args: Any, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            index = counter.before()
            try:
                return _real(*args, **kwargs)
            finally:
                counter.after(index)  # a refused condition is a write that was made too

        patch.setattr(client, name, call)


def _put(store: Store, generation: str, counter: WriteCounter, large: bool) -> str:
    rec = record(generation=generation, checks=4, log_bytes=70_000)
    with pytest.MonkeyPatch.context() as patch:
        if large:
            beyond_one_transaction(store, patch)
        _intercept(store, patch, counter)
        with suppress(PowerCut):
            assert put_record(store, rec, T0) == record_digest(rec)
    stored = get_record(store, record_digest(rec))
    assert stored is None or stored == rec, "whole or absent, never part"
    return record_digest(rec)


@pytest.mark.parametrize("large", [False, True], ids=["one-transaction", "beyond-one"])
def test_a_crash_at_any_write_of_a_put_leaves_no_orphan_the_collector_keeps(
    store: Store, large: bool
) -> None:
    sample = record(checks=4, log_bytes=70_000)
    chunks = digest_and_chunks(sample.model_dump(mode="json"))[1]
    assert len(chunks) > 1
    assert fits_one_transaction(chunks), "the sample fits one transaction"
    recording = WriteCounter()
    _put(store, "recording", recording, large)
    writes = recording.count
    assert writes >= (3 if large else 1)

    digests = []
    for at in range(writes):
        for phase in ("before", "after"):
            digests.append(_put(store, f"crash-{at}-{phase}", WriteCounter(at, phase), large))
    orphans = {s.digest for s in store.stale_records(FAR_FUTURE) if not s.has_manifest}
    if large:
        assert orphans, "a crash between the chunks and the manifest leaves orphans"
    else:
        assert orphans == set(), "one transaction: no crash leaves a chunk without a manifest"

    collected = collect_records(store, LONG_AFTER)
    # An orphan with chunks is reported; a bare DynamoDB intent (a crash before any chunk)
    # is removed without being counted. Either way nothing is left after the collection.
    assert set(collected.orphans) <= orphans
    if large:
        assert collected.orphans
    assert list(store.stale_records(FAR_FUTURE)) == [], "no chunk, intent or manifest is left"
    for digest in digests:
        assert store.get_record_chunks(digest) is None


def test_a_record_beyond_one_transaction_takes_the_chunked_path() -> None:
    assert not fits_one_transaction([b"x"] * 100), "100 chunks and a manifest: 101 items"
    assert fits_one_transaction([b"x"] * 99)
    assert fits_one_transaction([bytes(CHUNK_BYTES)] * 99), "1.7 MB: items bind first"
    assert not fits_one_transaction([bytes(400_000)] * 10), "4 MB and eleven item overheads"
    assert fits_one_transaction([bytes(390_000)] * 10)


def test_a_put_that_fits_is_one_write_on_sqlite_and_two_on_dynamodb(store: Store) -> None:
    """SQLite: one write transaction. DynamoDB: the refused touch of a manifest that does
    not exist yet, then one TransactWriteItems of every chunk and the manifest."""
    counter = WriteCounter()
    _put(store, "counted", counter, large=False)
    assert counter.count == (1 if isinstance(store, SqliteStore) else 2)
