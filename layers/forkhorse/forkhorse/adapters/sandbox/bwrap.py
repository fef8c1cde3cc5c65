"""The local quick sandbox: one bubblewrap child per check.

The child gets every namespace unshared (network included), an empty environment, no
capabilities, a read-only view of the Python runtime only (no host or repository files, no
/proc, no /dev), a private size-limited tmpfs, a seccomp filter and the harness's rlimits.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from forkhorse.adapters.sandbox.runtime import PythonRuntime, current_runtime
from forkhorse.adapters.sandbox.seccomp import filter_program
from forkhorse.adapters.sandbox.session import Limits, run_quick_check
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.receipts import CheckRecord, Evidence
from forkhorse.ports.git import Snapshot

TMPFS_BYTES = 16 * 1024 * 1024
SANDBOX_TMP = "/tmp"  # noqa: S108 - a private tmpfs inside the sandbox, not the host's /tmp


class BubblewrapMissing(RuntimeError):
    """Local quick checks need bubblewrap; there is no weaker fallback."""


class BwrapLauncher:
    def __init__(self, bwrap: str, runtime: PythonRuntime, seccomp: bytes) -> None:
        self._runtime = runtime
        self._seccomp = seccomp
        self._prefix = self._sandbox_arguments(bwrap, runtime)  # realpath calls cost ~1 ms

    def spawn(self, rpc_fd: int, harness_source: str) -> subprocess.Popen[bytes]:
        filter_read, filter_write = os.pipe()
        try:
            os.write(filter_write, self._seccomp)  # far below a pipe's capacity
            os.close(filter_write)
            return subprocess.Popen(
                self._argv(filter_read, rpc_fd, harness_source),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(rpc_fd, filter_read),
                env={},
            )
        finally:
            os.close(filter_read)

    @staticmethod
    def _sandbox_arguments(bwrap: str, runtime: PythonRuntime) -> list[str]:
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
            "--size",
            str(TMPFS_BYTES),
            "--tmpfs",
            SANDBOX_TMP,
            "--chdir",
            SANDBOX_TMP,
        ]

    def _argv(self, filter_fd: int, rpc_fd: int, harness_source: str) -> list[str]:
        return [
            *self._prefix,
            "--seccomp",
            str(filter_fd),
            "--",
            self._runtime.executable,
            "-I",
            "-S",
            "-c",
            harness_source,
            str(rpc_fd),
        ]

    def extra_hello(self) -> dict[str, str]:
        return {}

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        # bubblewrap's --die-with-parent takes the whole sandbox (its own PID namespace) along.
        if process.poll() is None:
            process.kill()

    def cleanup(self) -> None:
        """Nothing to remove: the sandbox's tmpfs vanishes with its mount namespace."""


class BwrapSandbox:
    """`QuickSandbox` for local mode: platform `local-bwrap`, evidence `dynamic-worker`."""

    platform = "local-bwrap"
    evidence: Evidence = "dynamic-worker"

    def __init__(self, limits: Limits | None = None, bwrap: str | None = None) -> None:
        found = bwrap or shutil.which("bwrap")
        if found is None:
            raise BubblewrapMissing(
                "bubblewrap (bwrap) is not installed; quick checks need it in local mode."
            )
        self._launcher = BwrapLauncher(found, current_runtime(), filter_program())
        self._limits = limits or Limits()

    def run_check(self, snapshot: Snapshot, definition: QuickCheckDef) -> CheckRecord:
        return run_quick_check(self._launcher, snapshot, definition, self.platform, self._limits)
