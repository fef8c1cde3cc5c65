"""PromoteJournal port: the local promote workflow's durable log of completed steps.

Each step's output is recorded before the next step begins, so after a crash the workflow
resumes from its last completed step. Step Functions keeps this on AWS; locally SQLite does.
"""

from datetime import datetime
from typing import Any, Protocol

STARTED = "Started"  # the workflow's input
ENDED = "Ended"  # the last entry of a finished workflow


class PromoteJournal(Protocol):
    def start(self, promotion_id: str, state: dict[str, Any], at: datetime) -> bool:
        """Record a workflow's input; False if that promotion's workflow already started."""
        ...

    def record(self, promotion_id: str, step: str, output: dict[str, Any], at: datetime) -> None:
        """Record that `step` completed with `output`."""
        ...

    def last(self, promotion_id: str) -> tuple[str, dict[str, Any]] | None:
        """The last completed step and its output; None if the workflow never started."""
        ...

    def unfinished(self) -> list[str]:
        """Promotions whose workflow started and has not ended, oldest first."""
        ...
