"""Content-addressed records through a Store: canonical bytes in, verified bytes out.

Used for receipt records and for Flow-Next review receipts alike.
"""

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from forkhorse.domain.canonical import (
    Chunk,
    RecordCorruptedError,
    canonical_pieces,
    chunked,
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


# Pieces are hashed on a second thread in batches of at least this size while this one
# writes the next (hashlib releases the GIL on large buffers); a smaller record is hashed
# here, where a hand-over would cost more than it overlaps.
HASH_BATCH_BYTES = 256 * 1024
_HASHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="record-digest")


class _Digest:
    """SHA-256 of the pieces added, in order: batches on the hashing thread, the rest here."""

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._batch: list[bytes | memoryview] = []
        self._batch_bytes = 0
        self._hashing: Future[None] | None = None

    def add(self, piece: bytes | memoryview) -> None:
        self._batch.append(piece)
        self._batch_bytes += len(piece)
        if self._batch_bytes >= HASH_BATCH_BYTES:
            taken = threading.Event()
            self._hashing = _HASHER.submit(self._hash_batch, self._batch, taken)
            # Wait until the thread holds its batch: left to wake on its own, it would wait
            # for the GIL until this thread's next switch interval.
            taken.wait()
            self._batch, self._batch_bytes = [], 0

    def _hash_batch(self, batch: list[bytes | memoryview], taken: threading.Event) -> None:
        *head, last = batch
        try:
            for piece in head:
                self._hasher.update(piece)
        finally:
            taken.set()  # the writer goes on while the last, large piece is hashed
        self._hasher.update(last)

    def hexdigest(self) -> str:
        if self._hashing is not None:
            self._hashing.result()
        for piece in self._batch:
            self._hasher.update(piece)
        return self._hasher.hexdigest()


def _digested(
    pieces: Iterable[bytes | memoryview], digest: _Digest
) -> Iterator[bytes | memoryview]:
    for piece in pieces:
        digest.add(piece)
        yield piece


def digest_and_chunks(value: Any) -> tuple[str, list[Chunk]]:
    """The digest and the chunks of `value`'s canonical bytes, written in pieces so the digest
    of each overlaps the writing of the next."""
    digest = _Digest()
    chunks = chunked(_digested(canonical_pieces(value), digest))
    return digest.hexdigest(), chunks


def _get_bytes(store: RecordStore, digest: str) -> bytes | None:
    chunks = store.get_record_chunks(digest)
    return None if chunks is None else verified_bytes(digest, chunks)


def put_json(store: RecordStore, value: Any, now: datetime) -> str:
    """Store any JSON value in canonical form, written at `now` (the collector keeps it for
    its grace period from then); returns its digest."""
    digest, chunks = digest_and_chunks(value)
    store.put_record_chunks(digest, chunks, now)
    return digest


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
