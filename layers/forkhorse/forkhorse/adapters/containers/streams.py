"""Bound a stream while it is read, so a container printing gigabytes costs 64 KiB of memory.

`bound_log` needs the stream's head and tail only; this keeps exactly those two windows and
the byte count, then lets `bound_log` decide what to keep, so the result is identical to
bounding the whole stream at once.
"""

from __future__ import annotations

import os
import threading
from typing import IO

from forkhorse.domain.logs import LOG_BUDGET_BYTES, BoundedLog, bound_log

_WINDOW = LOG_BUDGET_BYTES  # each window is wider than what bound_log keeps of it
_READ_SIZE = 64 * 1024


class StreamSample:
    """The first and last 32 KiB of a stream plus its total size."""

    def __init__(self) -> None:
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    def feed(self, chunk: bytes) -> None:
        self._total += len(chunk)
        room = _WINDOW - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            del self._tail[: max(0, len(self._tail) - _WINDOW)]

    def bounded(self) -> BoundedLog:
        skipped = self._total - len(self._head) - len(self._tail)
        log = bound_log(bytes(self._head + self._tail))
        if skipped == 0:
            return log
        return log.model_copy(
            update={"total_bytes": self._total, "dropped_bytes": log.dropped_bytes + skipped}
        )


def drain_in_background(stream: IO[bytes], sample: StreamSample) -> threading.Thread:
    """Read `stream` to its end on a daemon thread, feeding `sample`."""

    def drain() -> None:
        with stream:
            while chunk := os.read(stream.fileno(), _READ_SIZE):
                sample.feed(chunk)

    thread = threading.Thread(target=drain, daemon=True, name="container-log")
    thread.start()
    return thread
