"""Stored canonical bytes never change: every fixture here was written by the serializer as it
was before any speed work, and each must still re-serialize to exactly its bytes and digest
(a changed digest would orphan every record already attached under the old one). The pinned
chunks are the text chunks versions before bytes chunks stored; such records are read back
from that layout in tests/integration/store/test_records.py."""

import json
from pathlib import Path

import pytest
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.domain.canonical import canonical_bytes, canonical_pieces, digest_of
from forkhorse.domain.receipts import ReceiptRecord
from forkhorse.records import digest_and_chunks, get_json, get_record, put_json, put_record

from tests.support.legacy_records import legacy_text_chunks
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
    assert b"".join(canonical_pieces(json.loads(data))) == data
    assert digest_of(data) == pinned["digest"]
    assert digest_and_chunks(json.loads(data))[0] == pinned["digest"]
    assert len(data) == pinned["bytes"]
    assert [len(chunk) for chunk in legacy_text_chunks(data)] == pinned["chunks"]


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
