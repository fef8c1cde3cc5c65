"""Orchestrator port: starts receipt executions and promote workflows (Step Functions on
AWS, the local supervisor)."""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

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


# The statuses of an execution that ended without its last state (Catch or Settle).
InterruptedStatus = Literal["FAILED", "TIMED_OUT", "ABORTED"]
INTERRUPTED: tuple[InterruptedStatus, ...] = ("FAILED", "TIMED_OUT", "ABORTED")

Workflow = Literal["receipt", "promote"]


class ExecutionEnded(BaseModel):
    """An execution's status change as the recovery rule receives it: which workflow,
    its status and the input it was started with (unknown keys ignored)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    status: str
    input: str

    @property
    def interrupted(self) -> bool:
        return self.status in INTERRUPTED


class ExecutionSweep(Protocol):
    """What the recovery sweeper asks the orchestrator (Step Functions on AWS)."""

    def interrupted_inputs(self, workflow: Workflow) -> Iterator[str]:
        """The inputs of the workflow's most recent interrupted executions."""
        ...

    def running_runs(self) -> frozenset[str]:
        """The names (generations) of the receipt executions still running."""
        ...


@dataclass(frozen=True)
class ExecutionLink:
    """Where an operator finds an execution: its ARN and its page in the AWS console."""

    arn: str
    console_url: str


@runtime_checkable
class NamesExecutions(Protocol):
    """An Orchestrator whose executions have names outside the service (Step Functions)."""

    def run_execution(self, run: RunRef) -> ExecutionLink: ...

    def promote_execution(self, project_id: str, promotion_id: str) -> ExecutionLink: ...


class TaskCallbacks(Protocol):
    """Answers a state that waits for a callback (Step Functions' task tokens)."""

    def succeed(self, token: str, output: dict[str, Any]) -> bool:
        """The waiting state goes on with `output`; False if it no longer waits."""
        ...

    def fail(self, token: str, error: str, cause: str) -> bool:
        """The waiting state fails with `error`; False if it no longer waits."""
        ...
