"""The trusted parent side of one quick check: spawn, serve the capability, decide the outcome.

One `run_quick_check` call owns one fresh child. The parent holds the snapshot reader, the
budget, the random capability id and the 10-second wall deadline. The child talks to it only
through a dedicated socket (never stdout); stdout and stderr are drained into bounded logs. At the
deadline a watchdog kills the child and revokes the budget, so pending reads fail too, and
the outcome is `timed-out` whatever arrives afterwards.
"""

from __future__ import annotations

import hmac
import os
import resource
import secrets
import selectors
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from forkhorse.adapters.sandbox import harness
from forkhorse.adapters.sandbox.programs import PYTHON_PROGRAM, ChildProgram
from forkhorse.domain.checks import QuickCheckDef, quick_module_digest
from forkhorse.domain.limits import QuickSandboxLimits, format_bytes
from forkhorse.domain.logs import LogSample
from forkhorse.domain.messages import sanitize_message
from forkhorse.domain.receipts import CheckRecord, FinalOutcome
from forkhorse.domain.snapshot import (
    BudgetExceeded,
    CapabilityRevoked,
    PathRejected,
    SnapshotBudget,
    SnapshotError,
    SnapshotUnavailable,
)
from forkhorse.ports.git import Snapshot, SnapshotReader

MAX_CHILD_FRAME_BYTES = 64 * 1024
READ_CHUNK_BYTES = 64 * 1024
EXIT_GRACE_SECONDS = 1.0

# The quick sandbox's limits live in forkhorse.domain.limits; `Limits` stays importable here.
Limits = QuickSandboxLimits

MESSAGE_TIMED_OUT = "The check did not finish within its 10-second deadline."
MESSAGE_CPU_LIMIT = "The check exceeded its 10-second CPU limit."
MESSAGE_RAISED = "The check raised an exception."
MESSAGE_INVALID_RESULT = (
    'The check returned an invalid result; a check returns {"ok": bool, "message"?: str}.'
)
MESSAGE_LONG_RESULT = "The check returned a message longer than 4 KiB."
MESSAGE_NO_RESULT = "The check exited without returning a result."
MESSAGE_IMPORT_FAILED = "The check module could not be imported or defines no check function."
MESSAGE_START_FAILED = "The quick-check sandbox failed to start."
MESSAGE_PROTOCOL = "The check broke the sandbox protocol."
MESSAGE_OUTPUT = "The check wrote more than 1 MiB of output."
MESSAGE_SNAPSHOT_FAILED = "The snapshot could not be read."
MESSAGE_MODULE_MISSING = "The check module is missing from the snapshot."
MESSAGE_MODULE_UNREADABLE = "The check module could not be read from the snapshot."


def child_rlimits(limits: QuickSandboxLimits) -> dict[str, tuple[int, int]]:
    """The child's rlimits (soft, hard) by `RLIMIT_` suffix. The hard CPU limit is one second
    later, so the soft limit's SIGXCPU names the cause."""
    return {
        "cpu": (limits.cpu_seconds, limits.cpu_seconds + 1),
        "as": (limits.address_space_bytes, limits.address_space_bytes),
        "fsize": (limits.file_size_bytes, limits.file_size_bytes),
        "nproc": (limits.processes, limits.processes),
        "nofile": (limits.open_files, limits.open_files),
        "core": (0, 0),
    }


def rlimit_resources(
    limits: QuickSandboxLimits, *, with_nproc: bool = True
) -> dict[int, tuple[int, int]]:
    """child_rlimits by `resource` constant, for a launcher that sets them itself."""
    return {
        getattr(resource, f"RLIMIT_{name.upper()}"): value
        for name, value in child_rlimits(limits).items()
        if with_nproc or name != "nproc"
    }


def hello_lines(limits: QuickSandboxLimits) -> list[str]:
    """The rlimits, for a harness that sets its own."""
    return [f"{name}={soft}:{hard}" for name, (soft, hard) in child_rlimits(limits).items()]


def limit_message(limit: bytes, limits: QuickSandboxLimits) -> str | None:
    """The message for a check that raised because it hit one of its limits (the harness
    names the limit from the exception; a module can only mislabel its own failure)."""
    messages = {
        harness.LIMIT_SPACE: "The check ran out of writable space "
        f"({format_bytes(limits.tmpfs_bytes)} in /tmp; the rest is read-only).",
        harness.LIMIT_FILE_SIZE: "The check exceeded its file size limit of "
        f"{format_bytes(limits.file_size_bytes)}.",
        harness.LIMIT_MEMORY: "The check exceeded its memory limit of "
        f"{format_bytes(limits.address_space_bytes)}.",
        harness.LIMIT_THREADS: f"The check exceeded its limit of {limits.processes} threads.",
        harness.LIMIT_FILES: f"The check exceeded its limit of {limits.open_files} open files.",
    }
    return messages.get(limit)


def heap_message(limits: QuickSandboxLimits) -> str:
    return f"The check exceeded its JavaScript heap limit of {format_bytes(limits.heap_bytes)}."


class Launcher(Protocol):
    """How one platform starts and kills the sandboxed child."""

    def spawn(self, rpc_fd: int, program: ChildProgram) -> subprocess.Popen[bytes]: ...

    def sets_limits(self, program: ChildProgram) -> bool: ...

    def extra_hello(self) -> dict[str, str]: ...

    def kill(self, process: subprocess.Popen[bytes]) -> None: ...

    def cleanup(self) -> None: ...


class _Violation(Exception):
    """A sticky capability or protocol violation: the check can no longer pass."""

    def __init__(self, outcome: FinalOutcome, message: str) -> None:
        super().__init__(message)
        self.outcome: FinalOutcome = outcome
        self.message = message


@dataclass
class _State:
    source: str | None = None
    source_requested: bool = False
    source_problem: str | None = None
    loaded: bool = False
    import_failed: bool = False
    verdict: tuple[bytes, bytes] | None = None
    violation: _Violation | None = None
    timed_out: bool = False
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class _FetchedSource:
    """The module as read from the snapshot: the reply to OP_SOURCE and why there is none."""

    reply: bytes
    source: str | None
    problem: str | None


@dataclass
class SessionPhases:
    """When the parent saw each step of one check, in seconds after `run` began (None: not
    reached); the benchmark splits a check's time by them."""

    child_ready: float | None = None  # the first frame: sandbox, interpreter and harness are up
    verdict: float | None = None
    reaped: float | None = None  # the child's logs closed and its exit reaped
    recorded: float | None = None


# Sessions whose child runs now, so that a stopping `forkhorse serve` can end them at once
# (`stop_running_sessions`) instead of waiting for their deadlines.
_running_lock = threading.Lock()
_running: dict[int, tuple[QuickCheckSession, subprocess.Popen[bytes]]] = {}


def stop_running_sessions() -> int:
    """Kill the child of every quick check running in this process, as its deadline would
    (bubblewrap takes its whole sandbox along). For a process that is stopping: the checks'
    outcomes are not used. Returns how many were running."""
    with _running_lock:
        running = list(_running.values())
    for session, process in running:
        session._expire(process)
    return len(running)


class QuickCheckSession:
    """One check, one child, one capability. Not reusable."""

    def __init__(
        self,
        launcher: Launcher,
        snapshot: Snapshot,
        definition: QuickCheckDef,
        platform: str,
        limits: Limits,
        program: ChildProgram = PYTHON_PROGRAM,
    ) -> None:
        self._launcher = launcher
        self._program = program
        self._definition = definition
        self._platform = platform
        self._limits = limits
        self._budget = SnapshotBudget()
        self._reader: SnapshotReader = snapshot.reader(self._budget)
        self._capability = secrets.token_hex(harness.CAPABILITY_BYTES // 2).encode()
        self._state = _State()
        self._stdout = LogSample()
        self._stderr = LogSample()
        self._rpc_buffer = bytearray()
        self._fetched_source: _FetchedSource | None = None
        self._started = 0.0
        self.phases = SessionPhases()

    def run(self) -> CheckRecord:
        started = self._started = time.monotonic()
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = self._spawn(child_end)
        except OSError:
            parent_end.close()
            self._launcher.cleanup()
            return self._record("infrastructure-error", MESSAGE_START_FAILED, started)
        watchdog = threading.Timer(
            max(0.0, started + self._limits.deadline_seconds - time.monotonic()),
            self._expire,
            args=(process,),
        )
        watchdog.daemon = True
        watchdog.start()
        with _running_lock:
            _running[id(self)] = (self, process)
        try:
            if self._program.preamble is not None:
                _send_frame(parent_end, self._program.preamble)
            self._send_hello(parent_end)
            # Read while the child starts, so the child's first request is answered at once;
            # the module counts as loaded only once the child has asked for it.
            self._fetched_source = self._fetch_source()
            self._serve(process, parent_end, started + self._limits.deadline_seconds)
            self._reap(process, started + self._limits.deadline_seconds)
        finally:
            with _running_lock:
                _running.pop(id(self), None)
            watchdog.cancel()
            self._end_capability()
            self._launcher.kill(process)
            process.wait()
            self.phases.reaped = self._elapsed()
            parent_end.close()
            self._launcher.cleanup()
        outcome, message = self._decide(process.returncode)
        return self._record(outcome, message, started)

    def _spawn(self, child_end: socket.socket) -> subprocess.Popen[bytes]:
        try:
            return self._launcher.spawn(child_end.fileno(), self._program)
        finally:
            child_end.close()

    def _send_hello(self, channel: socket.socket) -> None:
        fields = {
            "cap": self._capability.decode(),
            "name": "quick_check_module",
            "module": self._definition.module,
            **self._launcher.extra_hello(),
        }
        lines = [f"{key}={value}" for key, value in fields.items()]
        if not self._launcher.sets_limits(self._program):
            lines += hello_lines(self._limits)
        _send_frame(channel, "\n".join(lines).encode())

    # The watchdog: runs on its own thread at the deadline.
    def _expire(self, process: subprocess.Popen[bytes]) -> None:
        with self._state.lock:
            if self._state.finished:
                return
            self._state.timed_out = True
        self._budget.revoke()
        self._launcher.kill(process)

    def _end_capability(self) -> None:
        with self._state.lock:
            self._state.finished = True
        self._budget.revoke()

    def _serve(
        self, process: subprocess.Popen[bytes], channel: socket.socket, deadline: float
    ) -> None:
        assert process.stdout is not None
        assert process.stderr is not None
        with selectors.DefaultSelector() as selector:
            selector.register(channel, selectors.EVENT_READ)
            selector.register(process.stdout, selectors.EVENT_READ, self._stdout)
            selector.register(process.stderr, selectors.EVENT_READ, self._stderr)
            while selector.get_map() and not self._state.timed_out:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._expire(process)
                    break
                for key, _ in selector.select(remaining):
                    self._dispatch(selector, key, channel, process)

    def _dispatch(
        self,
        selector: selectors.BaseSelector,
        key: selectors.SelectorKey,
        channel: socket.socket,
        process: subprocess.Popen[bytes],
    ) -> None:
        if key.fileobj is channel:
            try:
                data = channel.recv(READ_CHUNK_BYTES)
            except OSError:
                data = b""
            if not data or not self._on_rpc_data(channel, data):
                selector.unregister(channel)
            return
        fd = key.fileobj.fileno()  # type: ignore[union-attr]
        try:
            data = _read_fd(fd)
        except OSError:
            data = b""
        if not data:
            selector.unregister(key.fileobj)
            return
        capture: LogSample = key.data
        capture.feed(data)
        if self._stdout.total_bytes + self._stderr.total_bytes > self._limits.output_bytes:
            self._violate(_Violation("failed", MESSAGE_OUTPUT))
            self._launcher.kill(process)

    def _on_rpc_data(self, channel: socket.socket, data: bytes) -> bool:
        """Buffer and handle complete frames; False once the channel must stop being served."""
        self._rpc_buffer += data
        while len(self._rpc_buffer) >= harness.FRAME_HEADER_BYTES:
            size = int.from_bytes(self._rpc_buffer[: harness.FRAME_HEADER_BYTES], "big")
            if size > MAX_CHILD_FRAME_BYTES:
                self._violate(_Violation("failed", MESSAGE_PROTOCOL))
                return False
            end = harness.FRAME_HEADER_BYTES + size
            if len(self._rpc_buffer) < end:
                return True
            frame = bytes(self._rpc_buffer[harness.FRAME_HEADER_BYTES : end])
            del self._rpc_buffer[:end]
            if not self._on_frame(channel, frame):
                return False
        return True

    def _on_frame(self, channel: socket.socket, frame: bytes) -> bool:
        capability, op, data = (
            frame[: harness.CAPABILITY_BYTES],
            frame[harness.CAPABILITY_BYTES : harness.CAPABILITY_BYTES + 1],
            frame[harness.CAPABILITY_BYTES + 1 :],
        )
        if not hmac.compare_digest(capability, self._capability) or self._closed():
            self._violate(_Violation("failed", MESSAGE_PROTOCOL))
            return False
        if self.phases.child_ready is None:
            self.phases.child_ready = self._elapsed()
        if op in (harness.OP_READ, harness.OP_STAT, harness.OP_LIST):
            return self._reply(channel, self._serve_call(op, data))
        if op == harness.OP_SOURCE and not self._state.source_requested:
            self._state.source_requested = True
            return self._reply(channel, self._serve_source())
        if op == harness.OP_LOADED and self._state.source is not None and not self._state.loaded:
            self._state.loaded = True
            return True
        if op == harness.OP_IMPORT_FAILED and not self._state.loaded:
            self._state.import_failed = True
            return False
        if op in (harness.OP_DONE, harness.OP_INVALID, harness.OP_RAISED) and self._state.loaded:
            self._state.verdict = (op, data)
            self.phases.verdict = self._elapsed()
            self._budget.revoke()  # the verdict is in: no further reads
            return False
        self._violate(_Violation("failed", MESSAGE_PROTOCOL))
        return False

    def _closed(self) -> bool:
        return self._state.timed_out or self._state.verdict is not None

    def _reply(self, channel: socket.socket, reply: bytes) -> bool:
        try:
            _send_frame(channel, reply)
        except OSError:
            return False
        return True

    def _serve_source(self) -> bytes:
        fetched = self._fetched_source or self._fetch_source()
        self._state.source, self._state.source_problem = fetched.source, fetched.problem
        return fetched.reply

    def _fetch_source(self) -> _FetchedSource:
        try:
            source = self._reader.read(self._definition.module)
        except SnapshotError as error:
            problem = _problem_message(error, MESSAGE_MODULE_UNREADABLE)
            return _FetchedSource(harness.REPLY_ERROR, None, problem)
        except Exception:
            return _FetchedSource(harness.REPLY_ERROR, None, MESSAGE_MODULE_UNREADABLE)
        if source is None:
            return _FetchedSource(harness.REPLY_NONE, None, MESSAGE_MODULE_MISSING)
        return _FetchedSource(harness.REPLY_TEXT + source.encode("utf-8"), source, None)

    def _serve_call(self, op: bytes, data: bytes) -> bytes:
        if self._state.source is None:
            self._violate(_Violation("failed", MESSAGE_PROTOCOL))
            return harness.REPLY_ERROR + MESSAGE_PROTOCOL.encode()
        try:
            return _encode_reply(op, self._call_reader(op, data))
        except SnapshotError as error:
            return self._refuse(error)
        except Exception:
            self._violate(_Violation("infrastructure-error", MESSAGE_SNAPSHOT_FAILED))
            return harness.REPLY_ERROR + MESSAGE_SNAPSHOT_FAILED.encode()

    def _call_reader(self, op: bytes, data: bytes) -> object:
        try:
            path = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise PathRejected("The path is not valid UTF-8.") from error
        if op == harness.OP_READ:
            return self._reader.read(path)
        if op == harness.OP_STAT:
            return self._reader.stat(path)
        return self._reader.list(path)

    def _refuse(self, error: SnapshotError) -> bytes:
        """Answer a refused call. Spent budgets and broken snapshots are sticky; a rejected
        path is only that call's error, which the module may handle (nothing was read)."""
        if isinstance(error, BudgetExceeded):
            self._violate(_Violation("failed", error.message))
        elif isinstance(error, SnapshotUnavailable):
            self._violate(_Violation("infrastructure-error", error.message))
        elif not isinstance(error, CapabilityRevoked):
            # Malformed UTF-8 and the like: the module may handle them and carry on.
            pass
        return harness.REPLY_ERROR + error.message.encode("utf-8", "replace")

    def _violate(self, violation: _Violation) -> None:
        if self._state.violation is None:
            self._state.violation = violation

    def _reap(self, process: subprocess.Popen[bytes], deadline: float) -> None:
        """Give the child until the deadline to exit; the watchdog kills it there."""
        timeout = deadline - time.monotonic()
        if self._state.verdict is not None or self._state.import_failed:
            timeout = min(timeout, EXIT_GRACE_SECONDS)
        try:
            process.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            if self._state.verdict is None and not self._state.import_failed:
                self._expire(process)

    def _decide(self, returncode: int | None) -> tuple[FinalOutcome, str]:
        state = self._state
        if state.timed_out:
            return "timed-out", MESSAGE_TIMED_OUT
        if state.violation is not None:
            return state.violation.outcome, state.violation.message
        if state.source is None:
            return "infrastructure-error", state.source_problem or MESSAGE_START_FAILED
        if state.import_failed or not state.loaded:
            return "infrastructure-error", MESSAGE_IMPORT_FAILED
        if _killed_by(returncode, signal.SIGXCPU):
            return "timed-out", MESSAGE_CPU_LIMIT
        memory_signal = self._program.memory_signal
        if state.verdict is None and memory_signal and _killed_by(returncode, memory_signal):
            return "failed", heap_message(self._limits)
        if state.verdict is None:
            return "failed", MESSAGE_NO_RESULT
        return _verdict_outcome(*state.verdict, self._limits)

    def _record(self, outcome: FinalOutcome, message: str, started: float) -> CheckRecord:
        source = self._state.source
        record = CheckRecord(
            name=self._definition.name,
            tier="quick",
            definition=self._definition.definition(),
            runtime="dynamic-worker",
            platform=self._platform,
            image_digest="" if source is None else quick_module_digest(source),
            outcome=outcome if source is not None else _never_passed(outcome),
            message=sanitize_message(message),
            duration_ms=int((time.monotonic() - started) * 1000),
            stdout=self._stdout.bounded(),
            stderr=self._stderr.bounded(),
        )
        self.phases.recorded = self._elapsed()
        return record

    def _elapsed(self) -> float:
        return time.monotonic() - self._started


def run_quick_check(
    launcher: Launcher,
    snapshot: Snapshot,
    definition: QuickCheckDef,
    platform: str,
    limits: Limits | None = None,
    program: ChildProgram = PYTHON_PROGRAM,
) -> CheckRecord:
    """Run one quick check in a fresh child and return its record (never raises for the check)."""
    session = QuickCheckSession(
        launcher, snapshot, definition, platform, limits or Limits(), program
    )
    return session.run()


def _verdict_outcome(
    op: bytes, data: bytes, limits: QuickSandboxLimits
) -> tuple[FinalOutcome, str]:
    if op == harness.OP_RAISED:
        return "failed", limit_message(data, limits) or MESSAGE_RAISED
    if op == harness.OP_INVALID:
        return "failed", MESSAGE_INVALID_RESULT
    flag, _, raw_message = data.partition(b"\0")
    if flag not in (b"0", b"1"):
        return "failed", MESSAGE_INVALID_RESULT
    if len(raw_message) > harness.MESSAGE_LIMIT_BYTES:
        return "failed", MESSAGE_LONG_RESULT
    try:
        message = raw_message.decode("utf-8")
    except UnicodeDecodeError:
        return "failed", MESSAGE_INVALID_RESULT
    return ("passed" if flag == b"1" else "failed"), message


def _never_passed(outcome: FinalOutcome) -> FinalOutcome:
    """Without loaded source a check cannot pass (defence in depth for _decide)."""
    return "infrastructure-error" if outcome == "passed" else outcome


def _problem_message(error: SnapshotError, fallback: str) -> str:
    return error.message if isinstance(error, SnapshotUnavailable | PathRejected) else fallback


def _encode_reply(op: bytes, value: object) -> bytes:
    if value is None:
        return harness.REPLY_NONE
    if op == harness.OP_READ:
        assert isinstance(value, str)
        return harness.REPLY_TEXT + value.encode("utf-8")
    if op == harness.OP_STAT:
        assert isinstance(value, dict)
        return harness.REPLY_STAT + f"{int(value['size'])},{int(bool(value['binary']))}".encode()
    assert isinstance(value, list)
    return harness.REPLY_LIST + harness.LIST_SEPARATOR.join(path.encode() for path in value)


def _send_frame(channel: socket.socket, payload: bytes) -> None:
    channel.sendall(len(payload).to_bytes(harness.FRAME_HEADER_BYTES, "big") + payload)


def _read_fd(fd: int) -> bytes:
    return os.read(fd, READ_CHUNK_BYTES)


def _killed_by(returncode: int | None, sig: signal.Signals) -> bool:
    # A direct child reports -signal; bubblewrap reports 128 + signal for its sandboxed child.
    return returncode in (-sig, 128 + sig)
