"""Following a review's receipt until it settles, reporting each check as it starts and ends.

The service shows a review's current execution as the fixed receipt summary in `/state`;
the follower polls it (bounded in time) and turns changes into events. The display prints
one line per event: with colour on a terminal, plain otherwise.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from forkhorse.client.api import ForkhorseClient
from forkhorse.client.errors import ClientError
from forkhorse.client.exits import DEFAULT_WAIT_SECONDS as DEFAULT_WAIT_SECONDS
from forkhorse.client.exits import EXIT_OF_OUTCOME as EXIT_OF_OUTCOME
from forkhorse.domain.receipts import ReceiptSummary, SummaryCheck

POLL_SECONDS = 0.5
# The receipt run's own ceiling (the spec's 7,200 s); a longer wait cannot help.
MAX_WAIT_SECONDS = 7200.0


@dataclass(frozen=True)
class CheckEvent:
    """A check started (`outcome` running) or ended (its final outcome)."""

    check: SummaryCheck
    started: bool


class WaitTimedOut(ClientError):
    """Still running when the wait ran out (exit code 2)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"The receipt was still running after {seconds:g} s.")


def follow(
    read: Callable[[], ReceiptSummary | None],
    *,
    timeout: float = DEFAULT_WAIT_SECONDS,
    poll: float = POLL_SECONDS,
    fresh: Callable[[ReceiptSummary], bool] | None = None,
) -> Iterator[CheckEvent | ReceiptSummary]:
    """Yield check events as they appear, then the settled summary. `fresh`, when given,
    ignores summaries it refuses (a promote waits for its own before-promote run)."""
    deadline = time.monotonic() + min(timeout, MAX_WAIT_SECONDS)
    seen: dict[str, bool] = {}  # check name -> ended
    while True:
        summary = read()
        if summary is not None and (fresh is None or fresh(summary)):
            for check in _begun(summary.checks):
                ended = check.outcome != "running"
                if check.name not in seen:
                    seen[check.name] = False
                    yield CheckEvent(check, started=True)
                if ended and not seen[check.name]:
                    seen[check.name] = True
                    yield CheckEvent(check, started=False)
            if summary.status != "running":
                yield summary
                return
        if time.monotonic() >= deadline:
            raise WaitTimedOut(timeout)
        time.sleep(poll)


def _begun(checks: list[SummaryCheck]) -> Iterator[SummaryCheck]:
    """The checks that have begun: the summary lists every declared check from the start,
    but quick checks run one at a time, in order, and full checks only after them all."""
    waiting = [c.name for c in checks if c.tier == "quick" and c.outcome == "running"]
    for check in checks:
        if not waiting or (check.tier == "quick" and check.name not in waiting[1:]):
            yield check


def review_summary(client: ForkhorseClient, project: str, review: str) -> ReceiptSummary | None:
    return client.review(project, review).receipt


_COLOURS = {"passed": "32", "failed": "31", "running": "36"}


class Progress:
    """One line per check start and end; colour only on a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.colour = self.stream.isatty()

    def _paint(self, outcome: str) -> str:
        if not self.colour:
            return outcome
        return f"\x1b[{_COLOURS.get(outcome, '33')}m{outcome}\x1b[0m"

    def event(self, event: CheckEvent) -> None:
        check = event.check
        where = f"{check.tier}/{check.runtime}" if check.runtime else check.tier
        if event.started:
            self.line(f"  {check.name} ({where}): started")
            return
        took = "" if check.duration_ms is None else f" in {check.duration_ms} ms"
        said = f": {check.message}" if check.message else ""
        self.line(f"  {check.name} ({where}): {self._paint(check.outcome)}{took}{said}")

    def line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


def watch(
    read: Callable[[], ReceiptSummary | None],
    progress: Progress | None,
    *,
    timeout: float = DEFAULT_WAIT_SECONDS,
    fresh: Callable[[ReceiptSummary], bool] | None = None,
) -> ReceiptSummary:
    """Follow to the end, reporting each event; the settled summary."""
    for item in follow(read, timeout=timeout, fresh=fresh):
        if isinstance(item, ReceiptSummary):
            return item
        if progress is not None:
            progress.event(item)
    raise AssertionError("follow ended without a summary")  # pragma: no cover
