"""Stored canonical bytes never change: every fixture here was written by the serializer as it
was before any speed work, and each must still re-serialize to exactly its bytes, digest and
chunks (a changed digest would orphan every record already attached under the old one)."""

import json
from pathlib import Path

import pytest
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.domain.canonical import canonical_bytes, chunk_text, digest_of
from forkhorse.domain.receipts import ReceiptRecord
from forkhorse.records import get_json, get_record, put_json, put_record

from tests.support.store import T0

FIXTURES = Path(__file__).parent / "canonical_fixtures"
PINNED: dict[str, dict[str, object]] = json.loads((FIXTURES / "digests.json").read_text())
RECORDS = sorted(name for name in PINNED if name.startswith("record-"))


def _stored(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_stored_value_reserializes_to_its_pinned_bytes_digest_and_chunks(name: str) -> None:
    data, pinned = _stored(name), PINNED[name]
    assert canonical_bytes(json.loads(data)) == data
    assert digest_of(data) == pinned["digest"]
    assert len(data) == pinned["bytes"]
    assert [len(chunk) for chunk in chunk_text(data.decode("utf-8"))] == pinned["chunks"]


@pytest.mark.parametrize("name", RECORDS)
def test_a_stored_record_round_trips_through_a_store_under_its_pinned_digest(
    name: str, tmp_path: Path
) -> None:
    data = _stored(name)
    rec = ReceiptRecord.model_validate_json(data)
    assert canonical_bytes(rec.model_dump(mode="json")) == data
    store = SqliteStore(tmp_path / "state")
    try:
        assert put_record(store, rec, T0) == PINNED[name]["digest"]
        assert put_json(store, json.loads(data), T0) == PINNED[name]["digest"]
        assert get_record(store, str(PINNED[name]["digest"])) == rec
        assert get_json(store, str(PINNED[name]["digest"]), lambda raw: raw) == data
    finally:
        store.close()
