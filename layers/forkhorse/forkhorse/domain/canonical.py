"""Canonical JSON, digests and chunks for content-addressed records.

The one documented form: `json.dumps` with sorted keys, compact separators
(`,` and `:`), `ensure_ascii=False` and no NaN/Infinity, encoded as UTF-8. The
digest is the lowercase SHA-256 hex of exactly those bytes.

Chunks cut those bytes every 16,384 UTF-8 code units (bytes), the last chunk shorter.
Versions before stored chunks as text of at most 16,384 UTF-16 code units, never split
inside a surrogate pair, so the UTF-8 of such a chunk is its part of the bytes: reads accept
both, and a record's digest is the same either way.

Speed: orjson writes the very same bytes for dicts with string keys, lists, strings,
integers, booleans and null (tests pin stored fixtures), so those take its path; anything
else (floats, whose exponents the two spell differently, tuples, other types) takes the
reference `json.dumps` path. `canonical_pieces` writes the same bytes in pieces, so a
digest can start on the first while the rest are written.
"""

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

CHUNK_BYTES = 16_384
_ORJSON_SCALARS = frozenset({str, int, bool, type(None)})
# `canonical_pieces` writes the members of containers this deep separately, a list's in this
# many runs: orjson costs about twice as much per byte on small outputs as on large ones.
_PIECES_DEPTH = 2
_RUNS_PER_LIST = 8

Chunk = bytes | memoryview  # a chunk as written: its part of the record's bytes
StoredChunk = bytes | str  # a chunk as read: text where an earlier version stored it so


class RecordCorruptedError(Exception):
    """The stored bytes do not hash to the digest they are stored under."""

    def __init__(self, digest: str) -> None:
        super().__init__(f"Stored record {digest} does not match its digest.")
        self.digest = digest


def canonical_bytes(value: Any) -> bytes:
    if _orjson_writes_it_alike(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass  # a lone surrogate or an integer past 64 bits: the reference path decides
    return reference_canonical_bytes(value)


def reference_canonical_bytes(value: Any) -> bytes:
    """The documented form, spelled out with the standard library."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _orjson_writes_it_alike(value: Any) -> bool:
    """Only dicts with string keys, lists and the scalars orjson spells as `json` does."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            if any(type(key) is not str for key in item):
                return False
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif kind not in _ORJSON_SCALARS:
            return False
    return True


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_pieces(value: Any, depth: int = _PIECES_DEPTH) -> Iterator[bytes | memoryview]:
    """`canonical_bytes(value)` in pieces whose concatenation is exactly those bytes: the
    members of a dict with string keys (in sorted order) and of a list (in runs) are written
    one by one, down to `depth`; anything else in one piece, as `canonical_bytes` writes it."""
    kind = type(value)
    if depth and kind is dict and value and all(type(key) is str for key in value):
        opening = b"{"
        for key in sorted(value):  # code point order: json's sort_keys and orjson's alike
            yield opening + canonical_bytes(key) + b":"
            yield from canonical_pieces(value[key], depth - 1)
            opening = b","
        yield b"}"
    elif depth and kind is list and len(value) > 1:
        run = -(-len(value) // _RUNS_PER_LIST)
        opening = b"["
        for start in range(0, len(value), run):
            yield opening
            yield memoryview(canonical_bytes(value[start : start + run]))[1:-1]  # no brackets
            opening = b","
        yield b"]"
    else:
        yield canonical_bytes(value)


def chunked(pieces: Iterable[bytes | memoryview], size: int = CHUNK_BYTES) -> list[Chunk]:
    """The bytes of `pieces`, concatenated, in chunks of `size` bytes (the last one shorter):
    views into the pieces, but for a chunk that spans pieces, which is joined."""
    chunks: list[Chunk] = []
    spanning: list[memoryview] = []  # the start of a chunk, completed from the next piece
    filled = 0
    for piece in pieces:
        view = memoryview(piece)
        if spanning:
            head = view[: size - filled]
            spanning.append(head)
            filled += len(head)
            if filled < size:
                continue
            chunks.append(b"".join(spanning))
            spanning, filled, view = [], 0, view[len(head) :]
        whole = len(view) - len(view) % size
        chunks.extend(view[start : start + size] for start in range(0, whole, size))
        if whole < len(view):
            spanning, filled = [view[whole:]], len(view) - whole
    if spanning:
        chunks.append(b"".join(spanning))
    return chunks


def verified_bytes(digest: str, chunks: Sequence[StoredChunk]) -> bytes:
    """Join stored chunks and refuse them unless they hash to `digest`."""
    try:
        data = b"".join(
            chunk if isinstance(chunk, bytes) else chunk.encode("utf-8") for chunk in chunks
        )
    except UnicodeEncodeError as error:  # a lone surrogate can never be canonical
        raise RecordCorruptedError(digest) from error
    if digest_of(data) != digest:
        raise RecordCorruptedError(digest)
    return data
