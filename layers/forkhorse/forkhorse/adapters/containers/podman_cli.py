"""The podman command line, with the flags these machines need on every call."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence

from forkhorse.domain.limits import CONTAINER
from forkhorse.ports.containers import ContainerError

# crun rejects the hybrid cgroup setup on these machines; runc works.
GLOBAL_FLAGS = ("--runtime", "runc")
# The limits cannot be raised here, so every container states them explicitly.
ULIMIT_FLAGS = (
    *("--ulimit", f"nofile={CONTAINER.open_files}:{CONTAINER.open_files}"),
    *("--ulimit", f"nproc={CONTAINER.user_processes}:{CONTAINER.user_processes}"),
)


class PodmanMissing(ContainerError):
    sentence = "podman is not installed: install podman and runc (apt-get install podman runc)."


NEUTRAL_DIRECTORY = tempfile.gettempdir()


class Podman:
    def __init__(self, executable: str = "podman") -> None:
        self.executable = executable

    def command(self, *args: str) -> list[str]:
        found = shutil.which(self.executable)
        if found is None:
            raise PodmanMissing()
        return [found, *GLOBAL_FLAGS, *args]

    def run(
        self, *args: str, stdin: bytes | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one podman command to completion; the caller reads `returncode`."""
        return subprocess.run(
            self.command(*args),
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
            cwd=NEUTRAL_DIRECTORY,  # conmon may leave files (`oom`) in its working directory
        )

    def output(self, *args: str, timeout: float = 120) -> str:
        """Run a podman command that must succeed and return its stdout as text."""
        completed = self.run(*args, timeout=timeout)
        if completed.returncode != 0:
            raise PodmanFailed(args, completed.stderr)
        return completed.stdout.decode("utf-8", "replace")


class PodmanFailed(ContainerError):
    sentence = "A podman command failed."

    def __init__(self, args: Sequence[str], stderr: bytes) -> None:
        # The detail is for operators' logs, never for receipts: str() stays the static sentence.
        super().__init__()
        self.detail = f"podman {' '.join(args[:2])}: {stderr.decode('utf-8', 'replace')[-500:]}"
