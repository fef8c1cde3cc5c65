"""Drain a container's output stream on a thread into a `LogSample` (constant memory)."""

from __future__ import annotations

import os
import threading
from typing import IO

from forkhorse.domain.logs import LogSample

_READ_SIZE = 64 * 1024


def drain_in_background(stream: IO[bytes], sample: LogSample) -> threading.Thread:
    """Read `stream` to its end on a daemon thread, feeding `sample`."""

    def drain() -> None:
        with stream:
            while chunk := os.read(stream.fileno(), _READ_SIZE):
                sample.feed(chunk)

    thread = threading.Thread(target=drain, daemon=True, name="container-log")
    thread.start()
    return thread
