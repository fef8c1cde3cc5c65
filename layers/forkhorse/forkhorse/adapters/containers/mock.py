"""A scripted ContainerPort for tests of the runner. It runs nothing.

Its evidence is always `mocked-container-port`, and its platform is `mock`: the gate rejects
both, so a mocked pass can never satisfy the required gate. The lifecycle rules are the real
ones (a second or reused container is refused, destroy is recorded), so runner tests exercise
the same contract.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass

from forkhorse.adapters.containers.common import Attempts, result_for
from forkhorse.domain.logs import bound_log
from forkhorse.domain.receipts import Evidence
from forkhorse.ports.containers import (
    CleanupUnconfirmed,
    ContainerHandle,
    ContainerResult,
    ContainerSpec,
    ImageUnresolved,
    PollState,
    require_pinned,
)

MOCK_IMAGES: Mapping[str, str] = {"default": "mock.invalid/default@sha256:" + "0" * 64}


@dataclass(frozen=True)
class MockRun:
    """What a scripted check does: its exit code (None: no exit code) and output."""

    exit_code: int | None = 0
    stdout: bytes = b""
    stderr: bytes = b""
    hangs: bool = False


class MockContainerPort:
    platform = "mock"
    evidence: Evidence = "mocked-container-port"

    def __init__(
        self,
        images: Mapping[str, str] = MOCK_IMAGES,
        script: Mapping[str, MockRun] | None = None,
        fail_cleanup: bool = False,
    ) -> None:
        self._images = dict(images)
        self._script = dict(script or {})
        self._fail_cleanup = fail_cleanup
        self._attempts = Attempts()
        self._ids = itertools.count(1)
        self._timed_out: set[str] = set()
        self.started: list[ContainerSpec] = []
        self.destroyed: list[str] = []

    def preflight(self, image_name: str) -> str:
        reference = self._images.get(image_name)
        if reference is None:
            raise ImageUnresolved()
        return require_pinned(reference)

    def start(self, spec: ContainerSpec) -> ContainerHandle:
        if spec.image_ref not in self._images.values():
            raise ImageUnresolved()
        self._attempts.claim(spec.execution, spec.check)
        self.started.append(spec)
        now = time.time()
        return ContainerHandle(
            platform=self.platform,
            container_id=f"mock-{next(self._ids)}",
            project=spec.project,
            execution=spec.execution,
            generation=spec.generation,
            check=spec.check,
            image_ref=spec.image_ref,
            started_at=now,
            deadline=now + spec.timeout_seconds,
        )

    def poll(self, handle: ContainerHandle) -> PollState:
        self._attempts.require_live(handle)
        if not self._run_of(handle).hangs:
            return "exited"
        if time.time() < handle.deadline:
            return "running"
        self._timed_out.add(handle.container_id)
        return "timed-out"

    def wait(self, handle: ContainerHandle, seconds: float) -> bool:
        if not self._run_of(handle).hangs:
            return True
        time.sleep(max(0.0, min(seconds, handle.deadline - time.time())))
        return False

    def collect(self, handle: ContainerHandle) -> ContainerResult:
        self._attempts.require_live(handle)
        run = self._run_of(handle)
        return result_for(
            exit_code=None if run.hangs else run.exit_code,
            timed_out=handle.container_id in self._timed_out,
            duration_ms=round((time.time() - handle.started_at) * 1000),
            stdout=bound_log(run.stdout),
            stderr=bound_log(run.stderr),
            timeout_seconds=handle.deadline - handle.started_at,
        )

    def destroy(self, handle: ContainerHandle) -> None:
        self._attempts.mark_destroyed(handle)
        if self._fail_cleanup:
            raise CleanupUnconfirmed()
        self.destroyed.append(handle.container_id)

    def cleanup_orphans(self, live_executions: frozenset[str]) -> list[str]:
        return []

    def _run_of(self, handle: ContainerHandle) -> MockRun:
        return self._script.get(handle.check, MockRun())
