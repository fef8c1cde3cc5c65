"""Helpers of the container tests, imported explicitly (fixtures: tests/support/containers.py)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from forkhorse.adapters.containers.common import EXECUTION_LABEL
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.ports.containers import (
    ContainerHandle,
    ContainerPort,
    ContainerResult,
    ContainerSpec,
    PollState,
)


def containers_of(podman: Podman, execution: str) -> list[str]:
    listed = podman.output(
        "ps", "--all", "--format", "json", "--filter", f"label={EXECUTION_LABEL}={execution}"
    )
    return [item["Id"] for item in json.loads(listed or "[]")]


def new_execution() -> str:
    return str(uuid.uuid4())


def spec_for(
    reference: str,
    run: str,
    source: Path,
    *,
    execution: str | None = None,
    check: str = "probe",
    timeout: int = 30,
) -> ContainerSpec:
    return ContainerSpec(
        project="proj",
        execution=execution or new_execution(),
        generation="gen-1",
        check=check,
        image_ref=reference,
        run=run,
        timeout_seconds=timeout,
        source=source,
    )


def wait_until_done(port: ContainerPort, handle: ContainerHandle) -> PollState:
    while (state := port.poll(handle)) == "running":
        time.sleep(0.02)
    return state


@dataclass
class Attempt:
    result: ContainerResult
    state: PollState
    seconds: float


RunCheck = Callable[..., Attempt]


def host_processes_with(marker: str) -> list[str]:
    """Host processes whose command line contains `marker` (containers share the host kernel)."""
    found = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    return [line for line in found.stdout.splitlines() if marker in line and "ps -eo" not in line]
