"""Orchestrator port: starts one receipt execution (Step Functions on AWS, a local supervisor)."""

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
