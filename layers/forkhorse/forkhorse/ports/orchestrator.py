"""Orchestrator port: starts receipt executions and promote workflows (Step Functions on
AWS, the local supervisor)."""

from typing import Any, Protocol

from forkhorse.domain.run import RunRef


class Orchestrator(Protocol):
    def start_run(self, run: RunRef) -> str:
        """Start the execution named by `run.generation`; return its handle (ARN or local id)."""
        ...

    def cancel_run(self, run: RunRef) -> bool:
        """Stop a superseded execution (queued: never starts; running: stops and its
        container goes); True when there was one to stop. Only for stale generations."""
        ...

    def wait(self, run: RunRef, timeout_seconds: float) -> bool:
        """Block until the execution ends or the timeout passes; True when it ended."""
        ...

    def history(self, run: RunRef) -> list[dict[str, Any]]:
        """The execution's events, shaped like Step Functions' GetExecutionHistory."""
        ...

    def start_promote(self, project_id: str, promotion_id: str) -> str:
        """Start the PromoteRun workflow of a queued promotion (named by its id, so a
        second start of the same promotion is refused); return the execution's name."""
        ...

    def promote_history(self, project_id: str, promotion_id: str) -> list[dict[str, Any]]:
        """The promote workflow's events, shaped like GetExecutionHistory; empty if none."""
        ...
