"""Content-addressed records through a Store: canonical bytes in, verified bytes out.

Used for receipt records and for Flow-Next review receipts alike.
"""

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from forkhorse.domain.canonical import (
    RecordCorruptedError,
    canonical_bytes,
    chunk_bytes,
    digest_of,
    verified_bytes,
)
from forkhorse.domain.receipts import ReceiptRecord
from forkhorse.ports.store import RecordStore

__all__ = [
    "RecordCorruptedError",
    "RecordRefusedError",
    "get_json",
    "get_record",
    "put_json",
    "put_record",
]

RECORD_REFUSED = "The attached record is not a valid receipt record."


class RecordRefusedError(RecordCorruptedError):
    """The bytes match their digest, but the receipt schema refuses them (a quick check
    without `runtime`, a runtime that is not its tier's, ...): altered evidence, as a
    mismatch is, never a server error."""

    def __init__(self, digest: str) -> None:
        super().__init__(digest)
        self.args = (f"Stored record {digest} is not a valid receipt record.",)


# Below this size a second thread costs more than the hash it would overlap.
PARALLEL_DIGEST_BYTES = 1 << 20
_CHUNKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunker")


def digest_and_chunks(data: bytes) -> tuple[str, list[str]]:
    """The digest and the chunks of `data`. hashlib releases the GIL on large buffers, so a
    big record is chunked on a second thread while this one hashes it (the other way round,
    the hash would wait for the GIL until the chunking yields it)."""
    if len(data) < PARALLEL_DIGEST_BYTES:
        return digest_of(data), chunk_bytes(data)
    chunks = _CHUNKER.submit(chunk_bytes, data)
    digest = digest_of(data)
    return digest, chunks.result()


def _put_bytes(store: RecordStore, data: bytes, now: datetime) -> str:
    digest, chunks = digest_and_chunks(data)
    store.put_record_chunks(digest, chunks, now)
    return digest


def _get_bytes(store: RecordStore, digest: str) -> bytes | None:
    chunks = store.get_record_chunks(digest)
    return None if chunks is None else verified_bytes(digest, chunks)


def put_json(store: RecordStore, value: Any, now: datetime) -> str:
    """Store any JSON value in canonical form, written at `now` (the collector keeps it for
    its grace period from then); returns its digest."""
    return _put_bytes(store, canonical_bytes(value), now)


def get_json(
    store: RecordStore, digest: str, parse: Callable[[bytes], Any] = json.loads
) -> Any | None:
    """The value stored under `digest`, or None. Raises RecordCorruptedError on a mismatch,
    and whatever `parse` raises on verified bytes it refuses."""
    data = _get_bytes(store, digest)
    return None if data is None else parse(data)


def put_record(store: RecordStore, record: ReceiptRecord, now: datetime) -> str:
    """Publish a receipt record (chunks first, manifest last); returns its digest."""
    return put_json(store, record.model_dump(mode="json"), now)


def get_record(store: RecordStore, digest: str) -> ReceiptRecord | None:
    """Read and verify a receipt record. Raises RecordCorruptedError on a mismatch, and
    RecordRefusedError (a RecordCorruptedError) on verified bytes the schema refuses."""
    data = _get_bytes(store, digest)
    if data is None:
        return None
    try:
        return ReceiptRecord.model_validate_json(data)
    except ValueError as refused:  # pydantic's ValidationError, on JSON or on shape
        raise RecordRefusedError(digest) from refused
