"""Canonical JSON, digests and chunks for content-addressed records.

The one documented form: `json.dumps` with sorted keys, compact separators
(`,` and `:`), `ensure_ascii=False` and no NaN/Infinity, encoded as UTF-8. The
digest is the lowercase SHA-256 hex of exactly those bytes.

Chunks split the JSON text into pieces of at most 16,384 UTF-16 code units (as
JavaScript counts string length), never between the two halves of a surrogate
pair, so a chunk holds at most 16,384 * 3 bytes = 48 KiB of UTF-8.
"""

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

CHUNK_CODE_UNITS = 16_384
_UTF16_UNIT = 2
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class RecordCorruptedError(Exception):
    """The stored bytes do not hash to the digest they are stored under."""

    def __init__(self, digest: str) -> None:
        super().__init__(f"Stored record {digest} does not match its digest.")
        self.digest = digest


def canonical_bytes(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_digest(value: str) -> bool:
    return _DIGEST.fullmatch(value) is not None


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


def chunk_bytes(data: bytes) -> list[str]:
    return chunk_text(data.decode("utf-8"))


def verified_bytes(digest: str, chunks: Sequence[str]) -> bytes:
    """Join stored chunks and refuse them unless they hash to `digest`."""
    try:
        data = "".join(chunks).encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate can never be canonical
        raise RecordCorruptedError(digest) from error
    if digest_of(data) != digest:
        raise RecordCorruptedError(digest)
    return data
