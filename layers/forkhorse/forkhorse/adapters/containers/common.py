"""What every container adapter shares: labels, names, the attempt bookkeeping and outcomes."""

from __future__ import annotations

import hashlib
import threading

from forkhorse.domain.logs import BoundedLog
from forkhorse.domain.receipts import FinalOutcome
from forkhorse.ports.containers import (
    ContainerHandle,
    ContainerRefused,
    ContainerResult,
    ContainerSpec,
)

LABEL_PREFIX = "forkhorse."
MANAGED_LABEL = "forkhorse.managed"
EXECUTION_LABEL = "forkhorse.execution"
CHECK_LABEL = "forkhorse.check"
# Several deployments (a service, a test session) may share one podman: orphan cleanup only
# ever touches containers of its own deployment.
DEPLOYMENT_LABEL = "forkhorse.deployment"


def labels_for(spec: ContainerSpec) -> dict[str, str]:
    """The labels (podman) or tags (ECS) that let orphan cleanup find a container."""
    return {
        MANAGED_LABEL: "true",
        f"{LABEL_PREFIX}project": spec.project,
        EXECUTION_LABEL: spec.execution,
        f"{LABEL_PREFIX}generation": spec.generation,
        CHECK_LABEL: spec.check,
    }


_NAME_PREFIX = "forkhorse-"
_CHECK_HASH_LENGTH = 16


def container_name(execution: str, check: str) -> str:
    """A unique, stable name per execution and check: a second create with it is refused."""
    check_hash = hashlib.sha256(check.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{_NAME_PREFIX}{execution}-{check_hash[:_CHECK_HASH_LENGTH]}"


def execution_of_name(name: str) -> str | None:
    """The execution a `container_name` belongs to; None for any other name."""
    if not name.startswith(_NAME_PREFIX) or len(name) <= len(_NAME_PREFIX) + _CHECK_HASH_LENGTH:
        return None
    return name[len(_NAME_PREFIX) : -(_CHECK_HASH_LENGTH + 1)]


class Attempts:
    """In-process guard: one container per execution and check, and a handle is single-use.

    Adapters also ask the platform itself (names, labels, tags), so the guard holds across
    processes; this adds the refusal of a second start after destroy and of a destroyed handle.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: set[tuple[str, str]] = set()
        self._destroyed: set[str] = set()

    def claim(self, execution: str, check: str) -> None:
        with self._lock:
            if (execution, check) in self._started:
                raise ContainerRefused()
            self._started.add((execution, check))

    def release(self, execution: str, check: str) -> None:
        """The launch never happened (the platform throttled it): a retry may claim again."""
        with self._lock:
            self._started.discard((execution, check))

    def require_live(self, handle: ContainerHandle) -> None:
        with self._lock:
            if handle.container_id in self._destroyed:
                raise ContainerRefused()

    def mark_destroyed(self, handle: ContainerHandle) -> None:
        with self._lock:
            self._destroyed.add(handle.container_id)


def result_for(
    *,
    exit_code: int | None,
    timed_out: bool,
    duration_ms: int,
    stdout: BoundedLog,
    stderr: BoundedLog,
    timeout_seconds: float,
    broken: str | None = None,
    limit: str | None = None,
) -> ContainerResult:
    """Only an exit code of exactly 0, read explicitly, without a timeout, is a pass.

    `limit` names the limit a failing check hit; it replaces the exit-code message."""
    outcome: FinalOutcome
    if timed_out:
        outcome, message = "timed-out", f"Timed out after {timeout_seconds:g} s."
    elif broken is not None or exit_code is None:
        outcome = "infrastructure-error"
        message = broken or "The container ended without an exit code."
    elif exit_code == 0:
        outcome, message = "passed", "Exited with code 0."
    else:
        outcome = "failed"
        message = f"Exited with code {exit_code}."
        if limit:
            message = f"{limit} {message}"
    return ContainerResult(
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        duration_ms=max(0, duration_ms),
        outcome=outcome,
        message=message,
    )
