"""FullWaits port: a full check's task token, held while its container runs.

On AWS, ReceiptRun's FullStart state waits for a callback (`waitForTaskToken`) instead of
polling: the FullStart function starts the container and holds the token here under the
run's generation and the check's name. Whoever sees the container end (FullStopped, on
ECS's task state change, or FullStart itself when the task ended at once) claims the hold
once and sends the result back with the token; FullOvertime, after the state timed out,
reads the hold for the container's handle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict


class HeldWait(BaseModel):
    """The token to call back with, and the started check's progress (its JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token: str
    progress: str


class FullWaits(Protocol):
    def hold(self, generation: str, check: str, wait: HeldWait, expires_at: datetime) -> None:
        """Keep the wait until `expires_at` (then it may vanish: its state timed out)."""
        ...

    def peek(self, generation: str, check: str) -> HeldWait | None:
        """The wait, claimed or not; None if it was never held or has expired."""
        ...

    def held(self, generation: str) -> dict[str, HeldWait]:
        """The run's unclaimed waits by check name (a run waits for one check at a time)."""
        ...

    def claim(self, generation: str, check: str) -> HeldWait | None:
        """The wait for the first caller only (it answers the callback); None for others."""
        ...
