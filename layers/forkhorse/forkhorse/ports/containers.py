"""ContainerPort: run one full check's command in an image pinned by an immutable digest.

The lifecycle of one attempt is preflight, start, poll (until it is not running), collect,
then destroy. Destroy runs on every attempt, whether it passed, failed, timed out or broke,
and it is confirmed: cleanup that cannot be confirmed raises `CleanupUnconfirmed`, and the
caller fails closed. Handles are plain data, so a step that polls may run in another process
than the step that started (Step Functions on AWS).

Images are names from deployment configuration (`default`, `busybox`, ...). Only `preflight`
turns a name into a reference, and only an immutable `...@sha256:<64 hex>` reference is
accepted: no client input ever selects an image reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from forkhorse.domain.logs import BoundedLog
from forkhorse.domain.receipts import Evidence, FinalOutcome
from forkhorse.ports.git import ArchiveLink

PINNED_REFERENCE = re.compile(r"[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}")
# Execution ids become container names, labels and ECS `startedBy` (at most 36 characters).
EXECUTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,35}")

PollState = Literal["running", "exited", "timed-out"]


class ContainerError(Exception):
    """Base of this port's errors. Each str is a safe, static sentence fit for a receipt."""

    sentence = "The container could not be run."

    def __init__(self, sentence: str | None = None) -> None:
        super().__init__(sentence or self.sentence)


class ImageUnresolved(ContainerError):
    """The image name has no immutable `@sha256:` reference: an infrastructure error."""

    sentence = "The check's image is not resolved to an immutable @sha256: reference."


class ContainerRefused(ContainerError):
    """A second container for the same execution and check, or reuse of a finished one."""

    sentence = "A container for this execution and check already exists or was already used."


class ContainerStartFailed(ContainerError):
    sentence = "The container could not be started."


class LaunchThrottled(ContainerError):
    """The platform refused the launch for now (throttling, no capacity): nothing started,
    so the step fails with this error's name and the state machine retries it with backoff."""

    sentence = "The container platform throttled the launch or had no capacity."


class CleanupUnconfirmed(ContainerError):
    """Destroy could not confirm that the container is gone: fail closed."""

    sentence = "Container cleanup could not be confirmed."


def require_pinned(reference: str) -> str:
    """Return `reference` when it is immutable (`name@sha256:<64 hex>`), else refuse it."""
    if not PINNED_REFERENCE.fullmatch(reference):
        raise ImageUnresolved()
    return reference


@dataclass(frozen=True)
class ContainerSpec:
    """One full check of one execution.

    `source` is the exact checkout: a host directory (podman copies it per run) or the
    180-second archive link of the snapshot (Fargate's init container fetches it).
    `image_ref` must be what `preflight` returned.
    """

    project: str
    execution: str
    generation: str
    check: str
    image_ref: str
    run: str
    timeout_seconds: int
    source: Path | ArchiveLink

    def __post_init__(self) -> None:
        if not EXECUTION_ID.fullmatch(self.execution):
            raise ValueError("execution must be 1-36 letters, digits, '-' or '_'")
        if self.timeout_seconds < 1:
            raise ValueError("timeout_seconds must be at least 1")
        require_pinned(self.image_ref)


class ContainerHandle(BaseModel):
    """A started container. Plain data: it survives JSON between runner steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    platform: str
    container_id: str
    project: str
    execution: str
    generation: str
    check: str
    image_ref: str
    started_at: float = Field(description="Wall-clock epoch seconds at start")
    deadline: float = Field(description="Wall-clock epoch seconds after which it is killed")


class ContainerEnded(BaseModel):
    """A container's end as its platform reports it (ECS's task state change): the execution
    it was started for and its id. Unknown keys are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    execution: str
    container_id: str


class ContainerResult(BaseModel):
    """What one attempt produced. `exit_code` is None when no exit code could be read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_code: int | None
    stdout: BoundedLog
    stderr: BoundedLog
    duration_ms: NonNegativeInt
    outcome: FinalOutcome
    message: str


class ContainerPort(Protocol):
    """Runs full checks. `platform` says where (`podman`, `fargate`, `mock`); `evidence` is
    `container` for real containers and always `mocked-container-port` for a mock."""

    @property
    def platform(self) -> str: ...

    @property
    def evidence(self) -> Evidence: ...

    def preflight(self, image_name: str) -> str:
        """The immutable reference for a configured image name; raises `ImageUnresolved`."""
        ...

    def start(self, spec: ContainerSpec) -> ContainerHandle:
        """Start the check; raises `ContainerRefused` for a second or reused container."""
        ...

    def poll(self, handle: ContainerHandle) -> PollState:
        """`running` until it ends; past its deadline it is killed and `timed-out`."""
        ...

    def wait(self, handle: ContainerHandle, seconds: float) -> bool:
        """Block until the container ends or `seconds` pass; whether it has ended. (Polls
        still decide: this only saves the time between a container's end and the next poll.)"""
        ...

    def collect(self, handle: ContainerHandle) -> ContainerResult:
        """Exit code, bounded streams, duration and outcome of a container that ended."""
        ...

    def destroy(self, handle: ContainerHandle) -> None:
        """Remove the container and its per-run data; raises `CleanupUnconfirmed`."""
        ...

    def cleanup_orphans(self, live_executions: frozenset[str]) -> list[str]:
        """Destroy Forkhorse containers of executions not in `live_executions`; their ids."""
        ...
