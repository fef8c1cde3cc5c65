"""How many git smart-HTTP requests one process works on at once (issue 28).

`forkhorse serve` answers every route with one pool of waitress threads. A git request can
hold its thread for seconds (a clone of a long history, a push), so without a cap a few
agents' fetches take every thread and the API, the console and every other project wait.
`GitAdmission` lets at most `requests` git requests run at once, at most `per_project` of
one project, and at most `waiting` more wait up to `wait_seconds` for a slot; any other is
answered at once with 503 and `Retry-After`, before any git work. `forkhorse serve` has
more threads than `requests` + `waiting`, so an API request always finds one.

On AWS each Lambda invocation serves one request, so the cap never binds there; API
Gateway and Lambda's own concurrency settings bound git traffic instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from forkhorse.domain.limits import GIT_CONCURRENCY, GitConcurrencyLimits


class GitAdmission:
    def __init__(self, limits: GitConcurrencyLimits = GIT_CONCURRENCY) -> None:
        self._limits = limits
        self._changed = threading.Condition(threading.Lock())
        self._running = 0
        self._waiting = 0
        self._per_project: dict[str, int] = {}

    @property
    def retry_after_seconds(self) -> int:
        return self._limits.retry_after_seconds

    @contextmanager
    def admitted(self, project: str) -> Iterator[bool]:
        """Yields whether the request may run now (it holds a slot until the block ends)."""
        admitted = self._acquire(project)
        try:
            yield admitted
        finally:
            if admitted:
                self._release(project)

    def running(self) -> int:
        with self._changed:
            return self._running

    def _free(self, project: str) -> bool:
        return (
            self._running < self._limits.requests
            and self._per_project.get(project, 0) < self._limits.per_project
        )

    def _acquire(self, project: str) -> bool:
        with self._changed:
            if not self._free(project):
                if self._waiting >= self._limits.waiting:
                    return False
                self._waiting += 1
                try:
                    deadline = time.monotonic() + self._limits.wait_seconds
                    while not self._free(project):
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return False
                        self._changed.wait(left)
                finally:
                    self._waiting -= 1
            self._running += 1
            self._per_project[project] = self._per_project.get(project, 0) + 1
            return True

    def _release(self, project: str) -> None:
        with self._changed:
            self._running -= 1
            held = self._per_project[project] - 1
            if held:
                self._per_project[project] = held
            else:
                del self._per_project[project]
            self._changed.notify_all()
