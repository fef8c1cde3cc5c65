"""Publishing the log in the process that appended (local mode): the local key signs at
once, one publish at a time across the home's processes (a lock file beside the tiles)."""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from pathlib import Path

from forkhorse.service.log_publishing import LogPublishing, LogSelfCheck

log = logging.getLogger(__name__)

# The incremental self-check runs after a publish at most this often (and at start).
SELF_CHECK_EVERY_SECONDS = 60.0


class InlinePublisher:
    def __init__(self, publishing: LogPublishing, check: LogSelfCheck, lock_file: Path) -> None:
        self._publishing = publishing
        self._check = check
        self._lock_file = lock_file
        self._lock = threading.Lock()
        self._checked_at: float | None = None

    def request(self) -> None:
        with self._lock, self._lock_file.open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            self._publishing.publish()
            if (
                self._checked_at is None
                or time.monotonic() - self._checked_at > SELF_CHECK_EVERY_SECONDS
            ):
                self._checked_at = time.monotonic()
                self._check.run()

    def check(self, full: bool = False) -> dict[str, object]:
        with self._lock, self._lock_file.open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            self._checked_at = time.monotonic()
            return self._check.run(full)
