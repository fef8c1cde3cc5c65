"""What a quick-check child runs, per module language: its runtime, arguments and first frame.

Both programs speak the same capability protocol (harness.py documents it) on the socket
whose number is their last argument, so the parent's side (session.py) does not care which
runs. The Python harness can set its own rlimits (a launcher may set them first); `node`
cannot, so its launcher sets them before `node` starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import marshal
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

from forkhorse.adapters.sandbox import harness
from forkhorse.domain.limits import MIB, QuickSandboxLimits

# node's RLIMIT_AS floor. V8 in Node 24 reserves a 512 MiB code range when it starts (Node 20:
# 128 MiB) and aborts ("Failed to reserve virtual memory for CodeRange") under the 1 GiB
# limit; measured, it needs about 1.1 GiB of address space before the check runs. What the
# check itself can use stays bounded by its V8 heap (`heap_bytes`) and this limit.
NODE_ADDRESS_SPACE_BYTES = 1536 * MIB


@dataclass(frozen=True)
class ChildProgram:
    arguments: tuple[str, ...]  # after the executable, before the capability socket's number
    preamble: bytes | None  # a frame the parent sends before the hello, if any
    # False: the launcher must set the rlimits before the program starts (it may anyway).
    sets_own_limits: bool
    # The signal the runtime dies of when its heap is exhausted (Python raises MemoryError).
    memory_signal: signal.Signals | None = None
    stdin: bytes = b""  # what the child reads as stdin (empty: /dev/null)

    def argv(self, executable: str, rpc_fd: int) -> list[str]:
        return [executable, *self.arguments, str(rpc_fd)]


@contextlib.contextmanager
def program_stdin(program: ChildProgram) -> Iterator[int]:
    """The child's stdin: a pipe already holding the program's stdin, else /dev/null."""
    if not program.stdin:
        yield subprocess.DEVNULL
        return
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program.stdin)  # far below a pipe's capacity
        os.close(write_end)
        write_end = -1
        yield read_end
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


# The Python child's program, read from stdin: it only reads the harness, compiled and
# marshalled by the parent, from the capability socket and runs it. Compiling the harness in
# every child would cost about 3 ms of start-up; this costs a tenth of that. Same interpreter,
# so marshal matches. From stdin rather than `-c`, whose source Python 3.13 registers with
# linecache, importing it from the standard library at every start.
BOOTSTRAP = (
    "import marshal,posix,sys\n"
    "f=int(sys.argv[1])\n"
    "def r(n):\n"
    " b=b''\n"
    " while len(b)<n:\n"
    "  c=posix.read(f,n-len(b))\n"
    "  if not c:posix._exit(1)\n"
    "  b+=c\n"
    " return b\n"
    "exec(marshal.loads(r(int.from_bytes(r(4),'big'))),globals())\n"
)


def _compiled_harness() -> bytes:
    with open(harness.__file__, encoding="utf-8") as handle:
        code = compile(handle.read(), "<forkhorse-quick-harness>", "exec", dont_inherit=True)
    return marshal.dumps(code)


PYTHON_PROGRAM = ChildProgram(
    ("-I", "-S", "-"), _compiled_harness(), True, stdin=BOOTSTRAP.encode()
)


def node_harness_source() -> str:
    return resources.files("forkhorse.adapters.sandbox").joinpath("harness.js").read_text("utf-8")


def node_permission_flags(version: tuple[int, int, int]) -> tuple[str, ...]:
    """The permission model with no grants: no file system, child processes, workers or
    addons. Node 18 and 19 have none (the sandbox and its seccomp filter still hold)."""
    if version >= (23, 5, 0) or (22, 13, 0) <= version < (23, 0, 0):
        return ("--permission",)
    if version >= (20, 0, 0):
        return ("--experimental-permission",)
    return ()


def node_limits(limits: QuickSandboxLimits) -> QuickSandboxLimits:
    """The limits a JavaScript check runs under: the same, with room for V8's reservations."""
    space = max(limits.address_space_bytes, NODE_ADDRESS_SPACE_BYTES)
    return dataclasses.replace(limits, address_space_bytes=space)


@functools.cache
def node_program(version: tuple[int, int, int], heap_bytes: int) -> ChildProgram:
    """`node <flags> -e <harness.js>` for a node of this version."""
    flags = (
        *node_permission_flags(version),
        "--experimental-vm-modules",  # vm.SourceTextModule: the check is an ES module
        "--no-warnings",  # the experimental-feature notices are not the check's logs
        f"--max-old-space-size={heap_bytes // MIB}",
        "--v8-pool-size=1",  # fewer start-up threads: the child's RLIMIT_NPROC is small
    )
    # V8 aborts the process at its heap limit.
    return ChildProgram((*flags, "-e", node_harness_source()), None, False, signal.SIGABRT)
