"""Immutable, content-addressed records: chunks under a manifest, and their collection."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from forkhorse.domain.canonical import Chunk, StoredChunk

# One DynamoDB transaction (TransactWriteItems): at most 100 items and 4 MB in all. A record
# whose chunks and manifest fit is written in one transaction by every Store, so no crash can
# leave its chunks without a manifest; only a larger record takes the intent, chunks, manifest
# path, whose orphans the collector removes (the SQLite Store keeps the same rule, so local
# mode takes the same paths as AWS).
ONE_TRANSACTION_ITEMS = 100
ONE_TRANSACTION_BYTES = 4_000_000  # "4 MB": read as decimal, the stricter
# A generous bound on an item's size beyond its chunk's bytes (keys, names, numbers).
CHUNK_ITEM_OVERHEAD_BYTES = 1024


def fits_one_transaction(chunks: Sequence[Chunk]) -> bool:
    """Whether `chunks` and their manifest fit one transaction (item count and size; a
    DynamoDB Binary attribute counts its raw bytes)."""
    if len(chunks) + 1 > ONE_TRANSACTION_ITEMS:
        return False
    size = CHUNK_ITEM_OVERHEAD_BYTES * (len(chunks) + 1)
    return size + sum(len(chunk) for chunk in chunks) <= ONE_TRANSACTION_BYTES


@dataclass(frozen=True, slots=True)
class StaleRecord:
    digest: str
    has_manifest: bool  # False: chunks (or an unfinished put) with no manifest


@dataclass(frozen=True, slots=True)
class RecordRemoval:
    manifest: bool  # the manifest was deleted
    chunks: int  # chunks deleted

    @property
    def removed(self) -> bool:
        return self.manifest or self.chunks > 0


class RecordStore(Protocol):
    def put_record_chunks(self, digest: str, chunks: Sequence[Chunk], now: datetime) -> None:
        """Write every chunk and the manifest in one transaction when they fit one (see
        `fits_one_transaction`); else every chunk, then the manifest last. A record is
        visible whole or not at all, all written at `now`. Idempotent: putting a stored
        digest again only moves its written-at time to `now`, so a collection racing the
        put keeps it.

        The manifest appears only while every chunk exists: if a collection removed a chunk
        of this unfinished put, the put writes it again before publishing."""
        ...

    def get_record_chunks(self, digest: str) -> list[StoredChunk] | None:
        """The chunks in order, or None if no manifest exists. Not verified here. A record an
        earlier version wrote has text chunks (their UTF-8 is the record's bytes)."""
        ...

    def stale_records(self, written_before: datetime) -> Iterator[StaleRecord]:
        """Every digest with a manifest, chunk or unfinished put written before
        `written_before` (each digest about once), and whether its manifest exists."""
        ...

    def delete_stale_record(self, digest: str, written_before: datetime) -> RecordRemoval:
        """Delete the manifest if written before `written_before`, then every chunk written
        before it, but never a chunk while a manifest or a newer unfinished put of the
        digest exists (so a put racing the deletion ends whole or not at all)."""
        ...
