"""Canonical JSON, digests and chunks for content-addressed records.

The one documented form: `json.dumps` with sorted keys, compact separators
(`,` and `:`), `ensure_ascii=False` and no NaN/Infinity, encoded as UTF-8. The
digest is the lowercase SHA-256 hex of exactly those bytes.

Chunks split the JSON text into pieces of at most 16,384 UTF-16 code units (as
JavaScript counts string length), never between the two halves of a surrogate
pair, so a chunk holds at most 16,384 * 3 bytes = 48 KiB of UTF-8.

Speed: orjson writes the very same bytes for dicts with string keys, lists, strings,
integers, booleans and null (tests pin stored fixtures), so those take its path; anything
else (floats, whose exponents the two spell differently, tuples, other types) takes the
reference `json.dumps` path.
"""

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

CHUNK_CODE_UNITS = 16_384
_UTF16_UNIT = 2
_ORJSON_SCALARS = frozenset({str, int, bool, type(None)})
_ASTRAL_LEADS = (b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")  # UTF-8 of U+10000 and up
# Decoding 4 MiB at once costs twice what 64 KiB windows do (the wide copy leaves the cache).
_DECODE_WINDOW = 64 * 1024


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


def _is_high_surrogate(units: bytes, offset: int) -> bool:
    return 0xD8 <= units[offset + 1] <= 0xDB  # little-endian: the high byte comes second


def chunk_text(text: str, max_units: int = CHUNK_CODE_UNITS) -> list[str]:
    """Split `text` into chunks of at most `max_units` UTF-16 code units, keeping pairs whole."""
    if max_units < 2:
        raise ValueError("a chunk must hold at least one surrogate pair")
    units = text.encode("utf-16-le", "surrogatepass")
    if len(units) == len(text) * _UTF16_UNIT:  # no astral characters: units are characters
        return [text[i : i + max_units] for i in range(0, len(text), max_units)]
    step = max_units * _UTF16_UNIT
    chunks: list[str] = []
    start = 0
    while start < len(units):
        end = min(start + step, len(units))
        if end < len(units) and _is_high_surrogate(units, end - _UTF16_UNIT):
            end -= _UTF16_UNIT
        chunks.append(units[start:end].decode("utf-16-le", "surrogatepass"))
        start = end
    return chunks


def chunk_bytes(data: bytes, max_units: int = CHUNK_CODE_UNITS) -> list[str]:
    """`chunk_text(data.decode("utf-8"))`, the same chunks, without one big decode when no
    character needs two UTF-16 units (then a chunk is simply `max_units` characters)."""
    if any(lead in data for lead in _ASTRAL_LEADS):
        return chunk_text(data.decode("utf-8"), max_units)
    chunks: list[str] = []
    carry = ""  # the start of a chunk, completed from the next window
    for text in _decoded_windows(data):
        head = max_units - len(carry) if carry else 0
        if carry:
            carry += text[:head]
            if len(carry) < max_units:
                continue
            chunks.append(carry)
        whole = len(text) - (len(text) - head) % max_units
        chunks.extend(text[i : i + max_units] for i in range(head, whole, max_units))
        carry = text[whole:]
    if carry:
        chunks.append(carry)
    return chunks


def _decoded_windows(data: bytes) -> Iterator[str]:
    """`data` decoded in windows of about `_DECODE_WINDOW` bytes, cut between characters."""
    view, start = memoryview(data), 0
    while start < len(data):
        end = min(start + _DECODE_WINDOW, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # a continuation byte
            end -= 1
        yield str(view[start:end], "utf-8")
        start = end


def verified_bytes(digest: str, chunks: Sequence[str]) -> bytes:
    """Join stored chunks and refuse them unless they hash to `digest`."""
    try:
        data = "".join(chunks).encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate can never be canonical
        raise RecordCorruptedError(digest) from error
    if digest_of(data) != digest:
        raise RecordCorruptedError(digest)
    return data
