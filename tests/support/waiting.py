"""Waiting for an event in tests: poll a condition, bounded in count and time, and name
what never came."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

POLL_SECONDS = 0.02


def eventually(
    condition: Callable[[], Any], what: str, seconds: float = 60.0, poll: float = POLL_SECONDS
) -> Any:
    """The condition's first truthy value, polled until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / poll) + 1):
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        time.sleep(poll)
    raise AssertionError(f"{what}: not seen within {seconds:.0f} s")
