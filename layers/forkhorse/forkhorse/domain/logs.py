"""Bounded logs: each output stream keeps at most 32 KiB of its original bytes.

The head and the tail of a stream are the useful parts (how it started, how it
failed), so a long stream keeps its first 16 KiB and its last 16 KiB and records
how many bytes were dropped between them and at which original offset.
"""

from pydantic import BaseModel, Field, NonNegativeInt

from forkhorse.domain.wire import WIRE_CONFIG

LOG_BUDGET_BYTES = 32 * 1024
_HEAD_BYTES = LOG_BUDGET_BYTES // 2
_MAX_SEQUENCE = 4  # the longest UTF-8 sequence


class BoundedLog(BaseModel):
    """One stream after bounding.

    `text` is the kept head followed by the kept tail, decoded as UTF-8 with
    replacement. When bytes were dropped, they were the `dropped_bytes` original
    bytes starting at original offset `dropped_at`; `total_bytes` is the original size.
    """

    model_config = WIRE_CONFIG

    text: str
    total_bytes: NonNegativeInt
    dropped_bytes: NonNegativeInt = 0
    dropped_at: NonNegativeInt | None = Field(default=None)

    @property
    def truncated(self) -> bool:
        return self.dropped_bytes > 0


EMPTY_LOG = BoundedLog(text="", total_bytes=0)


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _sequence_length(lead: int) -> int:
    """Length of the UTF-8 sequence a lead byte announces (1 for anything invalid)."""
    if lead >= 0xF0:
        return 4 if lead < 0xF8 else 1
    if lead >= 0xE0:
        return 3
    return 2 if lead >= 0xC0 else 1


def _head_end(data: bytes, limit: int) -> int:
    """Cut the head before a character that would straddle `limit`, so no byte is wasted."""
    for start in range(limit - 1, max(limit - _MAX_SEQUENCE, -1), -1):
        if not _is_continuation(data[start]):
            return start if start + _sequence_length(data[start]) > limit else limit
    return limit


def _tail_start(data: bytes, start: int) -> int:
    """Begin the tail at the next character boundary (skips at most 3 continuation bytes)."""
    end = min(start + _MAX_SEQUENCE - 1, len(data))
    while start < end and _is_continuation(data[start]):
        start += 1
    return start


def bound_log(data: bytes) -> BoundedLog:
    """Keep at most 32 KiB of `data`: the first 16 KiB and the last 16 KiB."""
    if len(data) <= LOG_BUDGET_BYTES:
        return BoundedLog(text=data.decode("utf-8", "replace"), total_bytes=len(data))
    head_end = _head_end(data, _HEAD_BYTES)
    tail_start = _tail_start(data, len(data) - (LOG_BUDGET_BYTES - head_end))
    text = data[:head_end].decode("utf-8", "replace") + data[tail_start:].decode("utf-8", "replace")
    return BoundedLog(
        text=text,
        total_bytes=len(data),
        dropped_bytes=tail_start - head_end,
        dropped_at=head_end,
    )


class LogSample:
    """Bounds a stream while it is read: only the first and last 32 KiB and the byte count
    are kept, so printing gigabytes costs 64 KiB. `bounded()` equals `bound_log` of the
    whole stream, because `bound_log` never keeps anything outside those two windows."""

    def __init__(self) -> None:
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    @property
    def total_bytes(self) -> int:
        return self._total

    def feed(self, chunk: bytes) -> None:
        self._total += len(chunk)
        room = LOG_BUDGET_BYTES - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            del self._tail[: max(0, len(self._tail) - LOG_BUDGET_BYTES)]

    def bounded(self) -> BoundedLog:
        skipped = self._total - len(self._head) - len(self._tail)
        log = bound_log(bytes(self._head + self._tail))
        if skipped == 0:
            return log
        return log.model_copy(
            update={"total_bytes": self._total, "dropped_bytes": log.dropped_bytes + skipped}
        )
