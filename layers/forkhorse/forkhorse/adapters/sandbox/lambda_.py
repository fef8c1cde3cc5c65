"""The quick sandbox inside the quick-check Lambda: the same harness, without bubblewrap.

Lambda offers no namespaces, so isolation comes from the function's placement (isolated
subnets, no NAT, only the S3 gateway endpoint, a role that can read the git bucket and nothing
else) and from this adapter: the parent makes itself non-dumpable (the child cannot read its
memory or /proc/<parent>/environ), and each child gets an empty environment, a private temp
directory that is wiped afterwards, the seccomp filter (no new processes, no network sockets,
no ptrace) and the same rlimits and deadline as locally. The child already runs as the
function's unprivileged user, so RLIMIT_NPROC binds. Its writable space is Lambda's /tmp, the
only writable filesystem there, bounded by the function's ephemeral storage (512 MiB), one
file by RLIMIT_FSIZE (16 MiB).

JavaScript checks run in `node` where the function's image has it (QuickCheckJsFunction);
`node` cannot set rlimits or a seccomp filter, so this launcher sets both between fork and
exec, and the filter survives the exec.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable

from forkhorse.adapters.sandbox.harness import install_seccomp
from forkhorse.adapters.sandbox.programs import (
    PYTHON_PROGRAM,
    ChildProgram,
    node_limits,
    node_program,
    program_stdin,
)
from forkhorse.adapters.sandbox.runtime import NodeMissing, node_runtime
from forkhorse.adapters.sandbox.seccomp import filter_program
from forkhorse.adapters.sandbox.session import (
    rlimit_resources,
    run_quick_check,
)
from forkhorse.domain.checks import QuickCheckDef, QuickLanguage
from forkhorse.domain.limits import QUICK_SANDBOX, QuickSandboxLimits
from forkhorse.domain.receipts import CheckRecord, Evidence, quick_not_run
from forkhorse.ports.git import Snapshot

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
# The Lambda runtime's python3.13 finds libpython3.13.so only through LD_LIBRARY_PATH
# (/var/lang/lib): the child gets that loader path, which is no secret, and nothing else.
_LOADER_VARIABLES = ("LD_LIBRARY_PATH",)


def child_environment() -> dict[str, str]:
    return {name: os.environ[name] for name in _LOADER_VARIABLES if name in os.environ}


def make_non_dumpable() -> None:
    """PR_SET_DUMPABLE 0: no core dumps, no ptrace and no /proc/<pid>/environ for same-uid peers."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def is_dumpable() -> bool:
    return bool(ctypes.CDLL(None).prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0))


def confinement(rlimits: dict[int, tuple[int, int]], seccomp: bytes) -> Callable[[], None]:
    """What a child that cannot confine itself runs between fork and exec."""

    def confine() -> None:
        for limit, value in rlimits.items():
            resource.setrlimit(limit, value)
        install_seccomp(seccomp)

    return confine


class LambdaLauncher:
    def __init__(
        self, executable: str, seccomp: bytes, limits: QuickSandboxLimits = QUICK_SANDBOX
    ) -> None:
        self._executable = executable
        self._seccomp = seccomp
        self._rlimits = rlimit_resources(limits)
        self._private_dir: str | None = None

    def spawn(self, rpc_fd: int, program: ChildProgram) -> subprocess.Popen[bytes]:
        self._private_dir = tempfile.mkdtemp(prefix="forkhorse-quick-")
        confine = None if program.sets_own_limits else confinement(self._rlimits, self._seccomp)
        with program_stdin(program) as stdin:
            return subprocess.Popen(
                program.argv(self._executable, rpc_fd),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(rpc_fd,),
                env=child_environment(),
                cwd=self._private_dir,
                start_new_session=True,
                preexec_fn=confine,  # one request at a time per Lambda process
            )

    def sets_limits(self, program: ChildProgram) -> bool:
        return not program.sets_own_limits

    def extra_hello(self) -> dict[str, str]:
        return {"seccomp": self._seccomp.hex(), "tmpdir": self._private_dir or ""}

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        # The child leads its own process group; the filter stops it from making others.
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

    def cleanup(self) -> None:
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None


class LambdaSandbox:
    """`QuickSandbox` inside QuickCheckFunction and QuickCheckJsFunction: platform `aws-lambda`."""

    platform = "aws-lambda"
    evidence: Evidence = "dynamic-worker"

    def __init__(
        self, limits: QuickSandboxLimits | None = None, executable: str | None = None
    ) -> None:
        make_non_dumpable()
        self._executable = executable or os.path.realpath(sys.executable)
        self._seccomp = filter_program()
        self._limits = limits or QUICK_SANDBOX

    def run_check(self, snapshot: Snapshot, definition: QuickCheckDef) -> CheckRecord:
        try:
            executable, program = self._program(definition.language)
        except NodeMissing as error:
            return quick_not_run(definition, self.platform, str(error))
        limits = self._limits if definition.language == "python" else node_limits(self._limits)
        launcher = LambdaLauncher(executable, self._seccomp, limits)
        return run_quick_check(launcher, snapshot, definition, self.platform, limits, program)

    def _program(self, language: QuickLanguage) -> tuple[str, ChildProgram]:
        if language == "python":
            return self._executable, PYTHON_PROGRAM
        runtime = node_runtime()
        return runtime.executable, node_program(runtime.version, self._limits.heap_bytes)
