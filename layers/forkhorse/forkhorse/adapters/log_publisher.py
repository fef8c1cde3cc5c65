"""Publishing the log in the process that appended (local mode): the local key signs at
once, one publish at a time across the home's processes (a lock file beside the tiles)."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

from forkhorse.service.log_publishing import LogPublishing


class InlinePublisher:
    def __init__(self, publishing: LogPublishing, lock_file: Path) -> None:
        self._publishing = publishing
        self._lock_file = lock_file
        self._lock = threading.Lock()

    def request(self) -> None:
        with self._lock, self._lock_file.open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            self._publishing.publish()
