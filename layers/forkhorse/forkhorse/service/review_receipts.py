"""One review's Flow-Next receipts as classification needs them, and their limits.

Receipts are content-addressed, so a receipt read once is kept by digest (it can never go
stale) in a cache bounded in bytes: classifying a new receipt reads only the store's digest
list, not every earlier receipt. Attaches to the same review are serialized by one of a
fixed set of locks, so the per-review limits hold without a global lock.

A receipt is held to the strict JSON rules and the receipt bounds both when it arrives and
when it is read back: a stored row that breaks them (written by hand, or by an older
version) is listed as unreadable, never a failed listing.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from forkhorse import records
from forkhorse.domain.canonical import RecordCorruptedError, canonical_bytes
from forkhorse.domain.limits import ReviewReceiptLimits
from forkhorse.domain.strict_json import InputRefused, check_value, parse_body
from forkhorse.ports.store import RecordStore, ReviewStore
from forkhorse.service.errors import BadRequest, Conflict, ServiceError

log = logging.getLogger(__name__)

_ATTACH_LOCKS = 64


class ReceiptTooLarge(ServiceError):
    kind = "too-large"


@dataclass(frozen=True, slots=True)
class StoredReceipt:
    digest: str
    value: object
    size: int  # canonical bytes


@dataclass(frozen=True, slots=True)
class ReviewLineage:
    """Every receipt attached to a review that could be read, and the digests that could
    not (corrupted or missing records are flagged, never raised)."""

    readable: tuple[StoredReceipt, ...]
    unreadable: tuple[str, ...]

    @property
    def digests(self) -> frozenset[str]:
        return frozenset(r.digest for r in self.readable) | frozenset(self.unreadable)

    @property
    def values(self) -> list[object]:
        return [r.value for r in self.readable]

    @property
    def size(self) -> int:
        return sum(r.size for r in self.readable)


def source_receipt_id_of(receipt: object) -> str | None:
    """The `findings.sourceReceiptId` a receipt claims, if it claims one."""
    findings = receipt.get("findings") if isinstance(receipt, Mapping) else None
    source = findings.get("sourceReceiptId") if isinstance(findings, Mapping) else None
    return source if isinstance(source, str) else None


class ReceiptState(ReviewStore, RecordStore, Protocol):
    """What review receipts read: the digests attached to a review, and their records."""


class ReviewReceipts:
    def __init__(self, store: ReceiptState, limits: ReviewReceiptLimits) -> None:
        self._store = store
        self._limits = limits
        self._cache: OrderedDict[str, StoredReceipt] = OrderedDict()
        self._cached_bytes = 0
        self._cache_lock = threading.Lock()
        self._attach_locks = tuple(threading.Lock() for _ in range(_ATTACH_LOCKS))

    def attaching(self, review_id: str) -> threading.Lock:
        """The lock every attach to `review_id` holds (shared with a few other reviews)."""
        return self._attach_locks[zlib.crc32(review_id.encode()) % _ATTACH_LOCKS]

    def lineage(self, review_id: str) -> ReviewLineage:
        readable, unreadable = [], []
        for digest in self._store.list_review_receipts(review_id):
            stored = self._read(digest)
            if stored is None:
                unreadable.append(digest)
            else:
                readable.append(stored)
        return ReviewLineage(tuple(readable), tuple(unreadable))

    def canonical(self, body: object) -> bytes:
        """The canonical bytes of a new receipt; 400 naming the rule or bound it breaks."""
        try:
            check_value(body, self._limits.parsing)
        except InputRefused as refused:
            raise BadRequest(f"The review receipt is refused: {refused}") from None
        return canonical_bytes(body)

    def check_generation(self, lineage: ReviewLineage, digest: str, body: object) -> None:
        """A `sourceReceiptId` names one generation: refuse other content under one already
        stored (attaching the very same receipt again is not a conflict)."""
        source = source_receipt_id_of(body)
        if source is None:
            return
        for stored in lineage.readable:
            if stored.digest != digest and source_receipt_id_of(stored.value) == source:
                raise Conflict(
                    f"The review already has receipt {stored.digest} with sourceReceiptId "
                    f"{source!r}; a generation id cannot name different content."
                )

    def check_room(self, lineage: ReviewLineage, size: int) -> None:
        """Refuse a new receipt of `size` canonical bytes past any per-review limit."""
        limits = self._limits
        if size > limits.receipt_bytes:
            raise ReceiptTooLarge(
                f"The review receipt is {size} bytes of canonical JSON; "
                f"the limit is {limits.receipt_bytes} bytes."
            )
        count = len(lineage.readable) + len(lineage.unreadable)
        if count >= limits.per_review:
            raise Conflict(
                f"The review already has {count} review receipts; "
                f"the limit is {limits.per_review} per review."
            )
        if lineage.size + size > limits.review_bytes:
            raise Conflict(
                f"The review's receipts would total {lineage.size + size} bytes; "
                f"the limit is {limits.review_bytes} bytes per review."
            )

    def remember(self, digest: str, value: object, size: int) -> None:
        self._keep(StoredReceipt(digest, value, size))

    def _read(self, digest: str) -> StoredReceipt | None:
        with self._cache_lock:
            cached = self._cache.get(digest)
            if cached is not None:
                self._cache.move_to_end(digest)
                return cached
        try:
            value = records.get_json(self._store, digest, self._parse)
        except (RecordCorruptedError, ValueError) as error:  # a bad digest, chunk or JSON
            log.warning("review receipt %s is unreadable: %s", digest, error)
            return None
        if value is None:
            return None
        stored = StoredReceipt(digest, value, len(canonical_bytes(value)))
        self._keep(stored)
        return stored

    def _parse(self, data: bytes) -> object:
        return parse_body(data, self._limits.parsing)

    def _keep(self, stored: StoredReceipt) -> None:
        with self._cache_lock:
            if stored.digest in self._cache:
                return
            self._cache[stored.digest] = stored
            self._cached_bytes += stored.size
            while self._cached_bytes > self._limits.cache_bytes and len(self._cache) > 1:
                _, evicted = self._cache.popitem(last=False)
                self._cached_bytes -= evicted.size
