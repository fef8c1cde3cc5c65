"""Streaming capture of one child output stream in constant memory.

The child may print megabytes; the parent keeps only what `bound_log` could ever keep (the
head and the tail), counts the rest, and then lets `bound_log` decide exactly as it would on
the whole stream.
"""

from collections import deque

from forkhorse.domain.logs import LOG_BUDGET_BYTES, BoundedLog, bound_log


class StreamCapture:
    def __init__(self) -> None:
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self.total_bytes = 0

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        room = LOG_BUDGET_BYTES - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail.append(data)
            self._tail_bytes += len(data)
            self._trim_tail()

    def _trim_tail(self) -> None:
        while self._tail_bytes - len(self._tail[0]) >= LOG_BUDGET_BYTES:
            self._tail_bytes -= len(self._tail.popleft())

    def log(self) -> BoundedLog:
        kept = bytes(self._head) + b"".join(self._tail)
        log = bound_log(kept)
        unseen = self.total_bytes - len(kept)
        if unseen == 0:
            return log
        # bound_log kept a head and a tail that both lie inside what was retained here; the
        # bytes never retained sit between them, so only the counts change.
        return log.model_copy(
            update={
                "total_bytes": self.total_bytes,
                "dropped_bytes": log.dropped_bytes + unseen,
            }
        )
