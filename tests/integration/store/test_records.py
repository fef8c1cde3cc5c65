"""Immutable records: chunks first, manifest last, verified on every read."""

import pytest
from forkhorse.domain.canonical import canonical_bytes, chunk_text, digest_of
from forkhorse.ports.store import Store
from forkhorse.records import RecordCorruptedError, get_json, get_record, put_json, put_record

from tests.support.store import T0, Tamper, beyond_one_transaction, record


def test_a_record_round_trips_under_its_digest(store: Store) -> None:
    rec = record(checks=4, log_bytes=70_000)
    digest = put_record(store, rec, T0)
    assert digest == digest_of(canonical_bytes(rec.model_dump(mode="json")))
    assert get_record(store, digest) == rec
    assert get_record(store, "0" * 64) is None


def test_put_is_idempotent(store: Store) -> None:
    rec = record()
    first = put_record(store, rec, T0)
    assert put_record(store, rec, T0) == first
    chunks = store.get_record_chunks(first)
    assert chunks is not None
    store.put_record_chunks(first, chunks, T0)
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
    tamper(digest, position, chunks[position].replace("passed", "failed", 1) + " ")
    with pytest.raises(RecordCorruptedError, match="does not match its digest"):
        get_record(store, digest)


def test_a_record_bigger_than_one_transaction_still_works(store: Store) -> None:
    """More than 100 chunks and more than 4 MB: beyond one DynamoDB transaction."""
    value = {"log": "€" * 1_700_000, "astral": "𝄞" * 300_000}
    data = canonical_bytes(value)
    assert len(data) > 4 * 1024 * 1024
    assert len(chunk_text(data.decode())) > 100
    digest = put_json(store, value, T0)
    assert get_json(store, digest) == value


def test_flow_next_documents_are_content_addressed(store: Store) -> None:
    receipt = {"type": "impl_review", "verdict": "SHIP", "mode": "codex", "note": "ünï ‮"}
    digest = put_json(store, receipt, T0)
    assert put_json(store, dict(reversed(receipt.items())), T0) == digest
    assert get_json(store, digest) == receipt
