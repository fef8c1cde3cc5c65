"""The local ContainerPort: podman with runc, no network, a read-only root, and the exact
checkout at /workspace under a fresh writable overlay per check.

Limits (forkhorse.domain.limits.CONTAINER): memory, CPUs, pids and rlimits; what a check
writes to /workspace (the overlay's upper layer) and /tmp lands on sized tmpfs mounts whose
pages count against the memory limit, so a check never writes to the host's disk; a seccomp
profile refuses every new namespace (no user namespaces).

The run's export is shared read-only by its checks (workspace.py): nothing is copied per
check. Podman round trips per check are the ones the guarantees need: one attached `podman
run` (its create is atomic on the unique name, so it is also the refusal of a second
container; the cidfile it writes on creation gives the id; with the passthrough log driver
the container's stdout and stderr are our pipes, bounded as they are read; with `--rm` it
removes the container once it ends and exits with the container's own exit code). Its
`remove` event in podman's event log confirms cleanup (removal_log.py); only without it is
`container exists` asked (`rm` first only when the container may still be there). `image
exists` runs once per image reference and again only when a run creates no
container.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from forkhorse.adapters.containers.common import (
    DEPLOYMENT_LABEL,
    EXECUTION_LABEL,
    Attempts,
    container_name,
    execution_of_name,
    labels_for,
    result_for,
)
from forkhorse.adapters.containers.images import CHECK_UID, ImageRegistry
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman
from forkhorse.adapters.containers.removal_log import RemovalLog
from forkhorse.adapters.containers.seccomp_profile import write_check_profile
from forkhorse.adapters.containers.streams import drain_in_background
from forkhorse.adapters.containers.workspace import (
    create_workspace,
    overlay_directories,
    remove_workspace,
    share_checkout,
    workspace_is_full,
)
from forkhorse.domain.limits import CONTAINER, ContainerLimits, format_bytes
from forkhorse.domain.logs import LogSample
from forkhorse.domain.receipts import Evidence
from forkhorse.ports.containers import (
    CleanupUnconfirmed,
    ContainerHandle,
    ContainerRefused,
    ContainerResult,
    ContainerSpec,
    ContainerStartFailed,
    ImageUnresolved,
    PollState,
    require_pinned,
)

RUNS_DIR = "runs"
SECCOMP_PROFILE = "seccomp.json"
_LOG_DRAIN_SECONDS = 10
# How long `podman run` may take to create the container (a podman call's own bound), and the
# pauses while its cidfile is awaited: creation takes tens of milliseconds.
_CREATE_SECONDS = 120
_CIDFILE_FIRST_PAUSE = 0.002
_CIDFILE_LAST_PAUSE = 0.02
_CONTAINER_ID_LENGTH = 64
_PODMAN_FAILED = 125
_SIGKILL_EXIT = 128 + 9
# How long a removal racing `--rm`'s own may take before cleanup counts as unconfirmed.
_REMOVE_DEADLINE_SECONDS = 30
# What a check that ran out of space prints (coreutils, busybox and most runtimes alike).
_NO_SPACE = "No space left on device"
# Checkouts already handed to the check user, most recent last; forgetting one only means
# handing it over again (idempotent), so the memory stays bounded on a long-lived server.
_SHARED_CHECKOUTS_REMEMBERED = 256
# `--volume` separates its fields with ":" and its options with ",".
_VOLUME_SEPARATORS = frozenset(":,")


def memory_limit_message(limits: ContainerLimits) -> str:
    return (
        f"The check exceeded its memory limit of {format_bytes(limits.memory_bytes)} "
        "(its processes plus the files it wrote to /workspace and /tmp)."
    )


def space_limit_message(limits: ContainerLimits) -> str:
    return (
        "The check ran out of workspace space "
        f"({format_bytes(limits.workspace_bytes)} on top of its checkout in /workspace, "
        f"{format_bytes(limits.tmp_bytes)} in /tmp)."
    )


@dataclass
class _Run:
    process: subprocess.Popen[bytes]
    stdout: LogSample
    stderr: LogSample
    drains: tuple[threading.Thread, ...]
    ended: threading.Event
    timed_out: bool = False
    ended_at: float | None = field(default=None)


class PodmanContainerPort:
    platform = "podman"
    evidence: Evidence = "container"

    def __init__(
        self,
        state_dir: Path,
        images: ImageRegistry | None = None,
        podman: Podman | None = None,
        limits: ContainerLimits | None = None,
        removals: RemovalLog | None = None,
    ) -> None:
        self._runs_dir = state_dir / RUNS_DIR
        self.deployment = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]
        self._images = images or ImageRegistry(state_dir)
        self._podman = podman or Podman()
        self._limits = limits or CONTAINER
        self._removals = removals or RemovalLog()
        self._seccomp_profile = state_dir / SECCOMP_PROFILE
        self._attempts = Attempts()
        self._lock = threading.Lock()
        self._live: dict[str, _Run] = {}
        self._present_images: set[str] = set()
        self._shared: OrderedDict[Path, None] = OrderedDict()

    # --- preflight ---------------------------------------------------------------------

    def preflight(self, image_name: str) -> str:
        reference = self._images.resolve(image_name)
        with self._lock:
            known = reference in self._present_images
        if not known:
            self._require_image(reference)
        return reference

    def _require_image(self, reference: str) -> None:
        """Ask podman; a pinned reference it has stays valid until removed, which a failed
        `create` finds out (and asks again)."""
        present = self._podman.run("image", "exists", reference).returncode == 0
        with self._lock:
            if present:
                self._present_images.add(reference)
            else:
                self._present_images.discard(reference)
        if not present:
            raise ImageUnresolved()

    # --- start -------------------------------------------------------------------------

    def start(self, spec: ContainerSpec) -> ContainerHandle:
        if not isinstance(spec.source, Path) or not spec.source.is_dir():
            raise ContainerStartFailed("The exact checkout is not a local directory.")
        require_pinned(spec.image_ref)
        self._attempts.claim(spec.execution, spec.check)
        # The workspace copy counts against the check's own time (it is bounded by the export
        # limits, so it cannot run on much past the deadline either).
        deadline = time.time() + spec.timeout_seconds
        name = container_name(spec.execution, spec.check)
        workspace = self._prepare_workspace(spec.source, name)
        try:
            run = self._launch(self._run_args(spec, name, spec.source, workspace), workspace.parent)
        except OSError as error:
            self._remove_run_dir(name)
            raise ContainerStartFailed() from error
        container_id = self._created_id(run, workspace.parent / "cid")
        if container_id is None:
            self._refuse_start(run, spec.image_ref, name)
        started_at = time.time()
        with self._lock:
            self._live[container_id] = run
        return ContainerHandle(
            platform=self.platform,
            container_id=container_id,
            project=spec.project,
            execution=spec.execution,
            generation=spec.generation,
            check=spec.check,
            image_ref=spec.image_ref,
            started_at=started_at,
            deadline=deadline,
        )

    def _created_id(self, run: _Run, cidfile: Path) -> str | None:
        """The container's id, once `podman run` has created it (it writes the cidfile
        before it starts the container); None when podman ended without creating one."""
        give_up = time.monotonic() + _CREATE_SECONDS
        pause = _CIDFILE_FIRST_PAUSE
        while time.monotonic() < give_up:
            ended = run.ended.is_set()  # read first: a quick check may end before we look
            written = _container_id_in(cidfile)
            if written is not None or ended:
                return written
            run.ended.wait(pause)
            pause = min(pause * 2, _CIDFILE_LAST_PAUSE)
        run.process.kill()
        run.ended.wait()
        return _container_id_in(cidfile)

    def _refuse_start(self, run: _Run, image_ref: str, name: str) -> NoReturn:
        """No container was created, so what podman wrote is its own error, not a check's."""
        for drain in run.drains:
            drain.join(_LOG_DRAIN_SECONDS)
        self._remove_run_dir(name)
        if "already in use" in run.stderr.bounded().text:
            raise ContainerRefused()
        self._require_image(image_ref)
        raise ContainerStartFailed()

    def _prepare_workspace(self, checkout: Path, name: str) -> Path:
        """The overlay's writable layer, on its own sized tmpfs: the check may change
        /workspace, never the shared checkout, and never write more than its allowance."""
        if _VOLUME_SEPARATORS & set(str(checkout.resolve()) + str(self._runs_dir.resolve())):
            raise ContainerStartFailed("The checkout's path has a ':' or ',' podman cannot mount.")
        run_dir = self._runs_dir / name
        if run_dir.exists():
            raise ContainerRefused()
        run_dir.mkdir(parents=True, mode=0o700)
        workspace = run_dir / "workspace"
        try:
            self._write_seccomp_profile()
            self._share(checkout)
            create_workspace(workspace, CHECK_UID, self._limits)
        except OSError as error:
            self._remove_run_dir(name)
            raise ContainerStartFailed("The check's workspace could not be prepared.") from error
        return workspace

    def _share(self, checkout: Path) -> None:
        """Hand the run's export to the check user once, whichever of its checks comes first."""
        key = checkout.resolve()
        with self._lock:
            if key in self._shared:
                self._shared.move_to_end(key)
                return
            share_checkout(key, CHECK_UID)
            self._shared[key] = None
            if len(self._shared) > _SHARED_CHECKOUTS_REMEMBERED:
                self._shared.popitem(last=False)

    def _write_seccomp_profile(self) -> None:
        """Generated from podman's default once per port; podman reads it at `create`."""
        with self._lock:
            if not self._seccomp_profile.exists():
                write_check_profile(self._seccomp_profile)

    def _run_args(
        self, spec: ContainerSpec, name: str, checkout: Path, workspace: Path
    ) -> list[str]:
        limits = self._limits
        labels = labels_for(spec) | {DEPLOYMENT_LABEL: self.deployment}
        label_flags = [
            flag for key, value in labels.items() for flag in ("--label", f"{key}={value}")
        ]
        return [
            "run",
            "--rm",  # a container that ends removes itself: destroy only confirms it is gone
            "--name", name,
            "--cidfile", str(workspace.parent / "cid"),
            "--pull", "never",
            *ULIMIT_FLAGS,
            "--network", "none",
            "--read-only",
            "--read-only-tmpfs=false",
            "--tmpfs",
            f"/tmp:rw,nosuid,nodev,size={limits.tmp_bytes},mode=1777",  # noqa: S108
            "--volume", _overlay_volume(checkout, workspace),
            "--workdir", "/workspace",
            "--user", f"{CHECK_UID}:{CHECK_UID}",
            "--cap-drop", "all",
            "--security-opt", "no-new-privileges",
            "--security-opt", f"seccomp={self._seccomp_profile}",
            "--pids-limit", str(limits.pids),
            "--memory", str(limits.memory_bytes),
            "--memory-swap", str(limits.memory_bytes),
            "--cpus", str(limits.cpus),
            "--hostname", "check",
            "--log-driver", "passthrough",
            *label_flags,
            spec.image_ref,
            "sh", "-c", spec.run,
        ]  # fmt: skip

    def _launch(self, args: list[str], run_dir: Path) -> _Run:
        """One attached `podman run`: with the passthrough log driver the container's stdout
        and stderr are this process's pipes, drained (bounded) on threads."""
        process = subprocess.Popen(
            self._podman.command(*args),
            # conmon drops files (such as `oom`) in its working directory: keep them in the
            # run's own directory, which destroy removes.
            cwd=run_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None
        assert process.stderr is not None
        stdout, stderr = LogSample(), LogSample()
        drains = (
            drain_in_background(process.stdout, stdout),
            drain_in_background(process.stderr, stderr),
        )
        return _Run(process, stdout, stderr, drains, _ended_event(process))

    # --- poll and collect ----------------------------------------------------------------

    def wait(self, handle: ContainerHandle, seconds: float) -> bool:
        run = self._run_of(handle)
        return run.ended.wait(max(0.0, min(seconds, handle.deadline - time.time())))

    def poll(self, handle: ContainerHandle) -> PollState:
        run = self._run_of(handle)
        if run.ended.is_set():
            run.ended_at = run.ended_at or time.time()
            return "timed-out" if run.timed_out else "exited"
        if time.time() < handle.deadline:
            return "running"
        self._kill(handle, run)
        return "timed-out"

    def _kill(self, handle: ContainerHandle, run: _Run) -> None:
        run.timed_out = True
        self._podman.run("kill", "--signal", "KILL", handle.container_id)
        try:
            run.process.wait(timeout=_LOG_DRAIN_SECONDS)
        except subprocess.TimeoutExpired:
            run.process.kill()
        run.ended_at = time.time()

    def collect(self, handle: ContainerHandle) -> ContainerResult:
        run = self._run_of(handle)
        if not run.ended.is_set():
            raise ContainerStartFailed("The container is still running.")
        for drain in run.drains:
            drain.join(_LOG_DRAIN_SECONDS)
        ended_at = run.ended_at or time.time()
        exit_code, broken = self._exit_code(run)
        return result_for(
            limit=self._limit_hit(handle, run, exit_code),
            exit_code=exit_code,
            timed_out=run.timed_out,
            duration_ms=round((ended_at - handle.started_at) * 1000),
            stdout=run.stdout.bounded(),
            stderr=run.stderr.bounded(),
            timeout_seconds=math.ceil(handle.deadline - handle.started_at),
            broken=broken,
        )

    def _exit_code(self, run: _Run) -> tuple[int | None, str | None]:
        """The container's exit code, as the attached `podman run` reports it: its own code,
        except 125, podman's own failure. (126 and 127, a command that cannot run or is
        missing, are the check's; podman's error then stands in the check's stderr.)"""
        code = run.process.returncode
        if code is None or code < 0:
            return None, "The container's runtime ended without its exit code."
        if code == _PODMAN_FAILED:
            return None, "podman failed while running the container."
        return code, None

    def _limit_hit(self, handle: ContainerHandle, run: _Run, exit_code: int | None) -> str | None:
        """The limit a failing check ran into, as far as the host can tell.

        Memory: the kernel's OOM killer sends SIGKILL (podman's OOMKilled stays false on
        these cgroup v1 hosts), and Forkhorse itself kills only at the deadline, so exit code
        137 without a timeout is read as the memory limit. Space: the workspace tmpfs is full
        when read from the host, or the check's own error output says ENOSPC (as for /tmp,
        which lives and dies inside the container); a check can only mislabel its own failure.
        """
        if run.timed_out or exit_code in (None, 0):
            return None
        if exit_code == _SIGKILL_EXIT:
            return memory_limit_message(self._limits)
        workspace = self._runs_dir / container_name(handle.execution, handle.check) / "workspace"
        if workspace_is_full(workspace) or _NO_SPACE in run.stderr.bounded().text:
            return space_limit_message(self._limits)
        return None

    def _run_of(self, handle: ContainerHandle) -> _Run:
        self._attempts.require_live(handle)
        with self._lock:
            run = self._live.get(handle.container_id)
        if run is None:
            raise ContainerRefused()
        return run

    # --- destroy and orphans -------------------------------------------------------------

    def destroy(self, handle: ContainerHandle) -> None:
        self._attempts.mark_destroyed(handle)
        with self._lock:
            run = self._live.pop(handle.container_id, None)
        if run is None or not run.ended.is_set() or not self._gone(handle.container_id):
            self._remove(handle.container_id)
        if run is not None and not run.ended.is_set():
            run.process.kill()
            run.ended.wait()  # the reaper reaps it: no second waitpid on a reused pid
        self._remove_run_dir(container_name(handle.execution, handle.check))

    def _remove(self, container_id: str) -> None:
        """Remove, and confirm it is gone.

        `--rm` may be removing the container at the same moment (a check that just ended):
        our `rm` then fails on podman's lock while it still exists, so retry until the
        deadline rather than report a cleanup that is merely in flight.
        """
        deadline = time.monotonic() + _REMOVE_DEADLINE_SECONDS
        pause = 0.05
        while True:
            self._podman.run("rm", "--force", "--time", "0", "--ignore", container_id)
            if self._gone(container_id):
                return
            if time.monotonic() >= deadline:
                raise CleanupUnconfirmed()
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _gone(self, container_id: str) -> bool:
        """podman logged its removal, or `container exists` answers "no" (exit code 1)."""
        if self._removals.removed(container_id):
            return True
        return self._podman.run("container", "exists", container_id).returncode == 1

    def _remove_run_dir(self, name: str) -> None:
        run_dir = self._runs_dir / name
        remove_workspace(run_dir / "workspace")
        shutil.rmtree(run_dir, ignore_errors=True)
        if run_dir.exists():
            raise CleanupUnconfirmed()

    def cleanup_orphans(self, live_executions: frozenset[str]) -> list[str]:
        removed = []
        for container in self._list_containers(f"label={DEPLOYMENT_LABEL}={self.deployment}"):
            if container["Labels"].get(EXECUTION_LABEL) not in live_executions:
                self._remove(container["Id"])
                removed.append(container["Id"])
        for run_dir in self._stale_run_dirs(live_executions):
            self._remove_run_dir(run_dir.name)
        return removed

    def _stale_run_dirs(self, live_executions: frozenset[str]) -> list[Path]:
        if not self._runs_dir.is_dir():
            return []
        return [
            path
            for path in self._runs_dir.iterdir()
            if execution_of_name(path.name) not in live_executions
        ]

    def _list_containers(self, *filters: str) -> list[dict[str, Any]]:
        filter_flags = [flag for item in filters for flag in ("--filter", item)]
        listed = self._podman.output("ps", "--all", "--format", "json", *filter_flags)
        containers: list[dict[str, Any]] = json.loads(listed or "[]")
        return containers


def _container_id_in(cidfile: Path) -> str | None:
    try:
        written = cidfile.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    return written if len(written) == _CONTAINER_ID_LENGTH else None


def _ended_event(process: subprocess.Popen[bytes]) -> threading.Event:
    """Set the moment `process` ends: a thread blocks in waitpid for it (Popen.wait with a
    timeout would poll with sleeps of up to 50 ms instead)."""
    ended = threading.Event()

    def reap() -> None:
        process.wait()
        ended.set()

    threading.Thread(target=reap, daemon=True, name="container-reaper").start()
    return ended


def _overlay_volume(checkout: Path, workspace: Path) -> str:
    """The shared checkout as the lower layer; writes go to this check's own tmpfs."""
    upper, work = overlay_directories(workspace)
    return f"{checkout.resolve()}:/workspace:O,upperdir={upper},workdir={work}"
