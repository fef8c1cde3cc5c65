"""Immutable records: chunks first, manifest last, verified on every read."""

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.adapters.sqlite.database import DATABASE_NAME
from forkhorse.domain.canonical import CHUNK_BYTES, canonical_bytes, chunked, digest_of
from forkhorse.domain.receipts import ReceiptRecord
from forkhorse.ports.store import Store
from forkhorse.ports.store.records import ONE_TRANSACTION_ITEMS, fits_one_transaction
from forkhorse.records import (
    RecordCorruptedError,
    digest_and_chunks,
    get_json,
    get_record,
    put_json,
    put_record,
)

from tests.support.legacy_records import legacy_text_chunks, put_legacy_record
from tests.support.store import T0, Tamper, beyond_one_transaction, record

FIXTURES = Path(__file__).parents[2] / "unit" / "receipts" / "canonical_fixtures"
PINNED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "digests.json").read_text())
PINNED_RECORDS = sorted(name for name in PINNED if name.startswith("record-"))
FAR_FUTURE = T0.replace(year=T0.year + 10)


def test_a_record_round_trips_under_its_digest(store: Store) -> None:
    rec = record(checks=4, log_bytes=70_000)
    digest = put_record(store, rec, T0)
    assert digest == digest_of(canonical_bytes(rec.model_dump(mode="json")))
    assert get_record(store, digest) == rec
    assert get_record(store, "0" * 64) is None


def test_chunks_are_stored_as_bytes_of_the_canonical_form(store: Store) -> None:
    rec = record(checks=4, log_bytes=70_000)
    data = canonical_bytes(rec.model_dump(mode="json"))
    stored = store.get_record_chunks(put_record(store, rec, T0))
    assert stored is not None
    assert all(isinstance(chunk, bytes) for chunk in stored)
    assert [len(chunk) for chunk in stored[:-1]] == [CHUNK_BYTES] * (len(stored) - 1)
    assert b"".join(chunk for chunk in stored if isinstance(chunk, bytes)) == data


def test_put_is_idempotent(store: Store) -> None:
    rec = record()
    first = put_record(store, rec, T0)
    assert put_record(store, rec, T0) == first
    digest, chunks = digest_and_chunks(rec.model_dump(mode="json"))
    store.put_record_chunks(digest, chunks, T0)
    assert get_record(store, first) == rec


def test_a_crash_before_the_manifest_leaves_nothing_visible(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = record(checks=3, log_bytes=40_000)

    def crash(*args: object) -> None:
        raise RuntimeError("power cut")

    with monkeypatch.context() as patch:
        beyond_one_transaction(store, patch)
        patch.setattr(store, "_write_manifest", crash)
        with pytest.raises(RuntimeError, match="power cut"):
            put_record(store, rec, T0)
    digest = digest_of(canonical_bytes(rec.model_dump(mode="json")))
    assert store.get_record_chunks(digest) is None
    assert get_record(store, digest) is None
    assert put_record(store, rec, T0) == digest, "a retry completes the record"
    assert get_record(store, digest) == rec


@pytest.mark.parametrize("index", [0, -1])
def test_a_tampered_chunk_is_refused_on_read(store: Store, tamper: Tamper, index: int) -> None:
    rec = record(checks=6, log_bytes=60_000)
    digest = put_record(store, rec, T0)
    chunks = store.get_record_chunks(digest)
    assert chunks is not None
    assert len(chunks) > 1
    position = index % len(chunks)
    chunk = chunks[position]
    assert isinstance(chunk, bytes)
    tamper(digest, position, chunk.replace(b"passed", b"failed", 1) + b" ")
    with pytest.raises(RecordCorruptedError, match="does not match its digest"):
        get_record(store, digest)


def test_a_flipped_byte_in_a_chunk_is_refused_on_read(store: Store, tamper: Tamper) -> None:
    value = {"log": "x" * (3 * CHUNK_BYTES)}
    digest = put_json(store, value, T0)
    flipped = bytearray(canonical_bytes(value)[CHUNK_BYTES : 2 * CHUNK_BYTES])
    flipped[100] ^= 0x01
    tamper(digest, 1, bytes(flipped))
    with pytest.raises(RecordCorruptedError, match="does not match its digest"):
        get_json(store, digest)


def test_a_record_bigger_than_one_transaction_still_works(store: Store) -> None:
    """More than 100 chunks and more than 4 MB: beyond one DynamoDB transaction."""
    value = {"log": "€" * 1_700_000, "astral": "𝄞" * 300_000}
    data = canonical_bytes(value)
    assert len(data) > 4 * 1024 * 1024
    assert len(chunked([data])) > 100
    digest = put_json(store, value, T0)
    assert get_json(store, digest) == value


@pytest.mark.parametrize(
    ("extra", "one_transaction"), [(0, True), (1, False)], ids=["99-chunks", "100-chunks"]
)
def test_records_at_the_one_transaction_limit_round_trip(
    store: Store, extra: int, one_transaction: bool
) -> None:
    """99 full chunks and a manifest fill one transaction; a byte more takes the chunked
    path. Every chunk item stays far below DynamoDB's 400 KB (moto refuses larger ones)."""
    wrapper = len(canonical_bytes({"log": ""}))
    value = {"log": "a" * ((ONE_TRANSACTION_ITEMS - 1) * CHUNK_BYTES - wrapper + extra)}
    chunks = digest_and_chunks(value)[1]
    assert len(chunks) == ONE_TRANSACTION_ITEMS - 1 + extra
    assert fits_one_transaction(chunks) is one_transaction
    digest = put_json(store, value, T0)
    assert get_json(store, digest) == value


def test_flow_next_documents_are_content_addressed(store: Store) -> None:
    receipt = {"type": "impl_review", "verdict": "SHIP", "mode": "codex", "note": "ünï ‮"}
    digest = put_json(store, receipt, T0)
    assert put_json(store, dict(reversed(receipt.items())), T0) == digest
    assert get_json(store, digest) == receipt


@pytest.mark.parametrize("name", PINNED_RECORDS)
def test_a_record_an_earlier_version_stored_as_text_reads_under_its_pinned_digest(
    store: Store, name: str
) -> None:
    data = (FIXTURES / f"{name}.json").read_bytes()
    digest = str(PINNED[name]["digest"])
    put_legacy_record(store, digest, legacy_text_chunks(data))
    rec = ReceiptRecord.model_validate_json(data)
    assert get_json(store, digest, lambda raw: raw) == data
    assert get_record(store, digest) == rec
    assert put_record(store, rec, T0) == digest, "putting it again keeps the stored record"
    assert get_json(store, digest, lambda raw: raw) == data


def test_a_text_record_with_an_astral_character_across_chunks_reads_back(store: Store) -> None:
    value = {"log": "x" + "𝄞" * 20_000 + "é" * 20_000}  # pairs at the chunk edges
    data = canonical_bytes(value)
    chunks = legacy_text_chunks(data)
    assert len(chunks) > 2
    put_legacy_record(store, digest_of(data), chunks)
    assert get_json(store, digest_of(data)) == value


def test_a_tampered_text_chunk_is_refused_on_read(store: Store) -> None:
    data = canonical_bytes({"status": "passed", "log": "y" * 40_000})
    chunks = legacy_text_chunks(data)
    chunks[-1] = chunks[-1].replace("y", "z", 1)
    put_legacy_record(store, digest_of(data), chunks)
    with pytest.raises(RecordCorruptedError, match="does not match its digest"):
        get_json(store, digest_of(data))


def test_a_text_record_is_collected_whole(store: Store) -> None:
    data = canonical_bytes({"log": "y" * 40_000})
    digest = digest_of(data)
    put_legacy_record(store, digest, legacy_text_chunks(data))
    removal = store.delete_stale_record(digest, FAR_FUTURE)
    assert (removal.manifest, removal.chunks) == (True, len(legacy_text_chunks(data)))
    assert list(store.stale_records(FAR_FUTURE)) == []


def test_a_database_from_before_bytes_chunks_reads_its_text_rows(tmp_path: Path) -> None:
    """The old schema's `text` column becomes `chunk`: its TEXT rows read as they were, new
    chunks are BLOBs beside them."""
    name = PINNED_RECORDS[0]
    data = (FIXTURES / f"{name}.json").read_bytes()
    digest = str(PINNED[name]["digest"])
    state = tmp_path / "state"
    state.mkdir()
    with sqlite3.connect(state / DATABASE_NAME) as db:
        db.executescript(
            "CREATE TABLE record_chunks (digest TEXT NOT NULL, idx INTEGER NOT NULL,"
            " text TEXT NOT NULL, PRIMARY KEY (digest, idx));"
            "CREATE TABLE records (digest TEXT PRIMARY KEY, chunk_count INTEGER NOT NULL);"
        )
        chunks = legacy_text_chunks(data)
        db.executemany(
            "INSERT INTO record_chunks VALUES (?, ?, ?)",
            [(digest, index, chunk) for index, chunk in enumerate(chunks)],
        )
        db.execute("INSERT INTO records VALUES (?, ?)", (digest, len(chunks)))
    db.close()
    store = SqliteStore(state)
    try:
        assert get_json(store, digest, lambda raw: raw) == data
        fresh = put_json(store, {"new": "record"}, T0)
        assert get_json(store, fresh) == {"new": "record"}
        types = store._conn().execute(
            "SELECT DISTINCT digest = ?, typeof(chunk) FROM record_chunks", (digest,)
        )
        assert sorted(types.fetchall()) == [(0, "blob"), (1, "text")]
    finally:
        store.close()
