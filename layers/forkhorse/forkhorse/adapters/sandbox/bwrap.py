"""The local quick sandbox: one bubblewrap child per check.

The child gets every namespace unshared (network included), an empty environment, no
capabilities, a read-only view of its runtime only (the Python interpreter and stdlib, or the
`node` binary; no host or repository files, no /proc, no /dev), a read-only root, a private
size-limited /tmp (the only writable place), a seccomp filter and the rlimits, and it runs as
an unprivileged uid on the host.

Started as root, bubblewrap must bind the runtime, which may live under root's mode-0700
home (pyenv), so the child's user namespace maps the host's root as well as the check's uid:
bubblewrap pauses (`--userns-block-fd`) until this launcher has written both mappings and set
the child's rlimits (prlimit), the namespace's root does the binds, and the harness then drops
to the check's uid for good, so the kernel counts the child's tasks against RLIMIT_NPROC (it
never does for the host's root). Started unprivileged, the Python harness sets its own rlimits;
for `node`, which cannot, bubblewrap pauses (`--block-fd`) until this launcher has set them.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import subprocess
import time
from dataclasses import dataclass

from forkhorse.adapters.sandbox.programs import (
    PYTHON_PROGRAM,
    ChildProgram,
    node_limits,
    node_program,
    program_stdin,
)
from forkhorse.adapters.sandbox.runtime import (
    NodeMissing,
    SandboxRuntime,
    current_runtime,
    node_runtime,
)
from forkhorse.adapters.sandbox.seccomp import filter_program
from forkhorse.adapters.sandbox.session import (
    rlimit_resources,
    run_quick_check,
)
from forkhorse.domain.checks import QuickCheckDef, QuickLanguage
from forkhorse.domain.limits import QUICK_SANDBOX, QuickSandboxLimits
from forkhorse.domain.receipts import CheckRecord, Evidence, quick_not_run
from forkhorse.ports.git import Snapshot

SANDBOX_TMP = "/tmp"  # noqa: S108 - a private tmpfs inside the sandbox, not the host's /tmp
_INFO_MAX_BYTES = 4096
_INFO_TIMEOUT_SECONDS = 5.0


class BubblewrapMissing(RuntimeError):
    """Local quick checks need bubblewrap; there is no weaker fallback."""


class BwrapLauncher:
    def __init__(
        self,
        bwrap: str,
        runtime: SandboxRuntime,
        seccomp: bytes,
        limits: QuickSandboxLimits = QUICK_SANDBOX,
    ) -> None:
        self._runtime = runtime
        self._seccomp = seccomp
        self._uid = limits.uid
        # Only root must map the namespace itself; anyone else is already unprivileged.
        self._as_root = os.geteuid() == 0
        # Unprivileged, RLIMIT_NPROC would count the caller's own processes, so only root's
        # children get it from here (a harness that sets its own sets it after dropping).
        self._rlimits = rlimit_resources(limits, with_nproc=self._as_root)
        # realpath calls cost ~1 ms, so the fixed arguments are built once.
        self._prefix = self._sandbox_arguments(bwrap, runtime, limits.tmpfs_bytes)

    def spawn(self, rpc_fd: int, program: ChildProgram) -> subprocess.Popen[bytes]:
        filter_read, filter_write = os.pipe()
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        start_read, start_write = os.pipe()
        gates = _Gates(
            info_write,
            block_read if self._as_root else -1,
            -1 if self._as_root or program.sets_own_limits else start_read,
        )
        try:
            os.write(filter_write, self._seccomp)  # far below a pipe's capacity
            os.close(filter_write)
            with program_stdin(program) as stdin:
                process = subprocess.Popen(
                    self._argv(filter_read, gates, rpc_fd, program),
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(rpc_fd, filter_read, *gates.fds()),
                    env={},
                    cwd="/",
                )
            for fd in (info_write, block_read, start_read):
                os.close(fd)
            info_write = block_read = start_read = -1
            try:
                self._prepare_child(gates, info_read, block_write, start_write, program)
            except OSError:
                self.kill(process)
                process.wait()
                raise
            return process
        finally:
            for fd in (
                *(filter_read, info_read, info_write, block_read, block_write),
                *(start_read, start_write),
            ):
                if fd >= 0:
                    os.close(fd)

    def sets_limits(self, program: ChildProgram) -> bool:
        """Whether this launcher sets the child's rlimits; if not, the program sets its own.
        As root it always does: bubblewrap waits for the namespace's mapping anyway, and a
        harness that need not load `resource` starts sooner."""
        return self._as_root or not program.sets_own_limits

    def _prepare_child(
        self, gates: _Gates, info_fd: int, block_fd: int, start_fd: int, program: ChildProgram
    ) -> None:
        """Map the child's user namespace (as root) and set its rlimits (unless the program
        sets its own), while bubblewrap waits; then let it go on."""
        if not gates.fds():
            return
        child = _read_child_pid(info_fd)
        if gates.userns_block >= 0:
            self._map_user_namespace(child)
        if self.sets_limits(program):
            for limit, value in self._rlimits.items():
                resource.prlimit(child, limit, value)
        os.write(block_fd if gates.userns_block >= 0 else start_fd, b"1")

    def _map_user_namespace(self, child: int) -> None:
        """Map the host's root and the check's uid into the child's user namespace."""
        mapping = f"0 0 1\n{self._uid} {self._uid} 1\n"
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{child}/{name}", "w", encoding="ascii") as handle:
                handle.write(mapping)

    @staticmethod
    def _sandbox_arguments(bwrap: str, runtime: SandboxRuntime, tmpfs_bytes: int) -> list[str]:
        # No /dev and no /proc: the interpreter needs neither (getrandom() seeds it).
        return [
            bwrap,
            "--unshare-all",
            "--unshare-user",
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            *runtime.bind_arguments(),
            "--perms",
            "1777",
            "--size",
            str(tmpfs_bytes),
            "--tmpfs",
            SANDBOX_TMP,
            # After every bind and tmpfs: the root tmpfs has no size, so nothing may write it.
            "--remount-ro",
            "/",
            "--chdir",
            SANDBOX_TMP,
        ]

    def _argv(self, filter_fd: int, gates: _Gates, rpc_fd: int, program: ChildProgram) -> list[str]:
        gate_arguments = []
        if gates.fds():
            gate_arguments += ["--info-fd", str(gates.info)]
        if gates.userns_block >= 0:
            # The namespace's root keeps CAP_SETUID/CAP_SETGID only until the harness drops them.
            gate_arguments += ["--userns-block-fd", str(gates.userns_block)]
            gate_arguments += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if gates.start_block >= 0:
            gate_arguments += ["--block-fd", str(gates.start_block)]
        return [
            *self._prefix,
            *gate_arguments,
            "--seccomp",
            str(filter_fd),
            "--",
            *program.argv(self._runtime.sandbox_executable, rpc_fd),
        ]

    def extra_hello(self) -> dict[str, str]:
        if not self._as_root:
            return {}
        return {"uid": str(self._uid), "gid": str(self._uid)}

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        # bubblewrap's --die-with-parent takes the whole sandbox (its own PID namespace) along.
        if process.poll() is None:
            process.kill()

    def cleanup(self) -> None:
        """Nothing to remove: the sandbox's tmpfs vanishes with its mount namespace."""


@dataclass(frozen=True)
class _Gates:
    """bubblewrap's pauses (-1: none): `userns_block` until the namespace is mapped and the
    rlimits set (as root), `start_block` until the rlimits are set (unprivileged, for a program
    that cannot set its own); `info` reports the child's pid."""

    info: int
    userns_block: int
    start_block: int

    def fds(self) -> tuple[int, ...]:
        gates = tuple(fd for fd in (self.userns_block, self.start_block) if fd >= 0)
        return (self.info, *gates) if gates else ()


def _read_child_pid(info_fd: int) -> int:
    """bubblewrap's --info-fd JSON names the sandbox's first process (its host pid)."""
    data = b""
    deadline = time.monotonic() + _INFO_TIMEOUT_SECONDS
    while b"}" not in data and len(data) < _INFO_MAX_BYTES:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([info_fd], [], [], remaining)[0]:
            raise OSError("bubblewrap did not report its child in time")
        chunk = os.read(info_fd, _INFO_MAX_BYTES)
        if not chunk:
            break
        data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError) as error:
        raise OSError("bubblewrap reported no child") from error


class BwrapSandbox:
    """`QuickSandbox` for local mode: platform `local-bwrap`, evidence `dynamic-worker`.

    Python modules run in the interpreter running Forkhorse, JavaScript modules in `node`;
    node is looked up at the first JavaScript check, so Python checks never need it."""

    platform = "local-bwrap"
    evidence: Evidence = "dynamic-worker"

    def __init__(self, limits: QuickSandboxLimits | None = None, bwrap: str | None = None) -> None:
        found = bwrap or shutil.which("bwrap")
        if found is None:
            raise BubblewrapMissing(
                "bubblewrap (bwrap) is not installed; quick checks need it in local mode."
            )
        self._bwrap = found
        self._limits = limits or QUICK_SANDBOX
        self._seccomp = filter_program()
        self._launchers: dict[QuickLanguage, tuple[BwrapLauncher, ChildProgram]] = {
            "python": (self._launcher(current_runtime()), PYTHON_PROGRAM)
        }

    def run_check(self, snapshot: Snapshot, definition: QuickCheckDef) -> CheckRecord:
        try:
            launcher, program = self._for(definition.language)
        except NodeMissing as error:
            return quick_not_run(definition, self.platform, str(error))
        limits = self._limits if definition.language == "python" else node_limits(self._limits)
        return run_quick_check(launcher, snapshot, definition, self.platform, limits, program)

    def _for(self, language: QuickLanguage) -> tuple[BwrapLauncher, ChildProgram]:
        if language not in self._launchers:
            runtime = node_runtime()
            program = node_program(runtime.version, self._limits.heap_bytes)
            self._launchers[language] = (
                self._launcher(runtime, node_limits(self._limits)),
                program,
            )
        return self._launchers[language]

    def _launcher(
        self, runtime: SandboxRuntime, limits: QuickSandboxLimits | None = None
    ) -> BwrapLauncher:
        return BwrapLauncher(self._bwrap, runtime, self._seccomp, limits or self._limits)
