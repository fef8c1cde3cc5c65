"""The quick-check harness: the trusted start of each sandboxed child.

It runs in `python3 -I -S - <fd>`, with the capability socket preopened as <fd> and a bootstrap
program as stdin; the bootstrap receives this module compiled by the parent and runs it. It
imports only builtin modules until the check itself asks for more, because every import is
start-up time. It sets the rlimits (unless the launcher did), empties the environment, fetches
the module SOURCE from the snapshot through the capability (the parent counts it in the
budget), runs it unchanged, and reports the verdict on that socket only. stdout and stderr
are just logs: nothing printed there can become a result. The parent also owns every budget
and the deadline, so a module that subverts this harness can at most lie about its own
verdict, never pass after the deadline.

Frames on the socket are a 4-byte big-endian length and a payload. The parent's first frame is the
hello (`key=value` lines). Each child frame is the capability id, one op byte and its data;
each parent reply starts with one kind byte.
"""

import _imp
import _thread
import posix
import sys

FRAME_HEADER_BYTES = 4
CAPABILITY_BYTES = 32
MESSAGE_LIMIT_BYTES = 4 * 1024
MESSAGE_CUT_NOTE = b" [message cut at 4 KiB]"

# Child -> parent ops.
OP_SOURCE = b"M"  # fetch the module source (its path is fixed by the parent)
OP_LOADED = b"O"  # the module imported and defines a callable `check`
OP_READ = b"R"
OP_STAT = b"S"
OP_LIST = b"L"
OP_DONE = b"D"  # verdict: b"1" or b"0", then optionally b"\0" and the UTF-8 message
OP_INVALID = b"I"  # `check` returned something that is not {ok: bool, message?: str}
OP_RAISED = b"F"  # `check` raised
OP_IMPORT_FAILED = b"X"  # the module could not be imported, or defines no `check`

# Parent -> child reply kinds.
REPLY_NONE = b"N"
REPLY_TEXT = b"T"
REPLY_STAT = b"S"
REPLY_LIST = b"L"
REPLY_ERROR = b"E"

LIST_SEPARATOR = b"\0"

# The limit a raised exception shows the check hit, sent as OP_RAISED's data.
LIMIT_SPACE = b"space"
LIMIT_FILE_SIZE = b"fsize"
LIMIT_MEMORY = b"memory"
LIMIT_THREADS = b"threads"
LIMIT_FILES = b"files"
# errno values (Linux, every architecture): ENOSPC, EROFS, EFBIG (RLIMIT_FSIZE), EMFILE.
_ERRNO_LIMITS = {28: LIMIT_SPACE, 30: LIMIT_SPACE, 27: LIMIT_FILE_SIZE, 24: LIMIT_FILES}
_CAUSES_SEARCHED = 8
_MAX_FD = 1 << 16
CO_COROUTINE = 0x80
RESULT_KEYS = frozenset({"ok", "message"})


class CapabilityError(Exception):
    """The parent refused a ctx call (rejected path, budget, revoked capability...)."""


_lock = _thread.allocate_lock()
_hello: dict[str, str] = {}


def _rpc_fd() -> int:
    """The capability socket: preopened by the parent, its number is the one argument."""
    return int(sys.argv[1])


def _read_exact(count: int) -> bytes:
    chunks = []
    while count:
        chunk = posix.read(_rpc_fd(), min(count, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _receive() -> bytes:
    return _read_exact(int.from_bytes(_read_exact(FRAME_HEADER_BYTES), "big"))


def _send(op: bytes, data: bytes = b"") -> None:
    payload = _hello["cap"].encode() + op + data
    view = memoryview(len(payload).to_bytes(FRAME_HEADER_BYTES, "big") + payload)
    while view:
        view = view[posix.write(_rpc_fd(), view) :]


def _call(op: bytes, data: bytes = b"") -> bytes:
    with _lock:
        _send(op, data)
        return _receive()


def _request(op: bytes, path: object) -> object:
    if type(path) is not str:
        raise TypeError("ctx paths are strings")
    reply = _call(op, path.encode("utf-8", "surrogatepass"))
    kind, body = reply[:1], reply[1:]
    if kind == REPLY_NONE:
        return None
    if kind == REPLY_TEXT:
        return body.decode("utf-8")
    if kind == REPLY_STAT:
        size, binary = body.split(b",")
        return {"size": int(size), "binary": binary == b"1"}
    if kind == REPLY_LIST:
        return [item.decode("utf-8") for item in body.split(LIST_SEPARATOR)] if body else []
    raise CapabilityError(body.decode("utf-8", "replace"))


class Ctx:
    """What a synchronous `check(ctx)` receives."""

    __slots__ = ()

    def read(self, path: str) -> object:
        return _request(OP_READ, path)

    def stat(self, path: str) -> object:
        return _request(OP_STAT, path)

    def list(self, prefix: str) -> object:
        return _request(OP_LIST, prefix)


class AsyncCtx:
    """What an `async def check(ctx)` receives: the same calls, awaitable."""

    __slots__ = ()

    async def read(self, path: str) -> object:
        return _request(OP_READ, path)

    async def stat(self, path: str) -> object:
        return _request(OP_STAT, path)

    async def list(self, prefix: str) -> object:
        return _request(OP_LIST, prefix)


def _apply_limits() -> None:
    """Set the rlimits the hello names; none when the launcher already set them."""
    if "cpu" not in _hello:
        return
    import resource  # a shared object, loaded only when needed

    for name, limit in (
        ("RLIMIT_CPU", "cpu"),
        ("RLIMIT_AS", "as"),
        ("RLIMIT_FSIZE", "fsize"),
        ("RLIMIT_NPROC", "nproc"),
        ("RLIMIT_NOFILE", "nofile"),
        ("RLIMIT_CORE", "core"),
    ):
        soft, _, hard = _hello[limit].partition(":")
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard or soft)))


def _close_stray_fds() -> None:
    """Keep only stdio and the capability socket (a launcher's pipes may have leaked in)."""
    fd = _rpc_fd()
    posix.closerange(3, fd)
    posix.closerange(fd + 1, _MAX_FD)


def _drop_privileges() -> None:
    """Become the unprivileged uid the launcher names, for good (bubblewrap's child starts as
    the namespace's root, mapped to the host's root so it could bind the runtime)."""
    if not _hello.get("uid"):
        return
    uid, gid = int(_hello["uid"]), int(_hello["gid"])
    posix.setgroups([])
    posix.setresgid(gid, gid, gid)
    posix.setresuid(uid, uid, uid)
    if posix.getresuid() != (uid, uid, uid) or posix.getgroups():
        raise PermissionError("the quick-check child kept its privileges")


def install_seccomp(program: bytes) -> None:
    """Install the parent's filter where no bubblewrap did (the Lambda child; the Lambda
    launcher also calls it between fork and exec of a `node` child)."""
    import ctypes  # only the Lambda child pays for ctypes

    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_char_p))

    libc = ctypes.CDLL(None, use_errno=True)
    fprog = SockFprog(len(program) // 8, program)
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def _empty_environment() -> None:
    for key in list(posix.environ):
        posix.unsetenv(key)
    posix.environ.clear()
    if _hello.get("tmpdir"):
        posix.putenv(b"TMPDIR", _hello["tmpdir"].encode())
        posix.environ[b"TMPDIR"] = _hello["tmpdir"].encode()


def _start() -> None:
    for line in _receive().decode().splitlines():
        key, _, value = line.partition("=")
        _hello[key] = value
    _close_stray_fds()
    _drop_privileges()
    _apply_limits()
    if _hello.get("seccomp"):
        install_seccomp(bytes.fromhex(_hello["seccomp"]))
    _empty_environment()


def _load_check() -> object:
    reply = _call(OP_SOURCE)
    if reply[:1] != REPLY_TEXT:
        posix._exit(0)  # the parent already knows why no source loaded
    module = type(sys)(_hello["name"])
    module.__file__ = _hello["module"]
    sys.modules[module.__name__] = module
    _run_source(reply[1:].decode("utf-8"), _hello["module"], module.__dict__)
    check = module.__dict__.get("check")
    if not callable(check):
        raise LookupError("the module defines no callable check")
    return check


_names_pending: list[str] = []  # the file name for the code exec() compiles next
_CodeType = type(_rpc_fd.__code__)
_fix_co_filename = _imp._fix_co_filename  # type: ignore[attr-defined]


def _name_compiled_code(event: str, args: tuple[object, ...]) -> None:
    if event == "exec" and _names_pending and isinstance(args[0], _CodeType):
        _fix_co_filename(args[0], _names_pending.pop())


def _run_source(source: str, path: str, namespace: dict[str, object]) -> None:
    """Run the module as `exec(compile(source, path, "exec", dont_inherit=True))` would.

    compile() first builds the ast module's node types (about 1 ms, a tenth of the
    interpreter's start); exec() of the string skips that. exec() inherits only this module's
    __future__ flags, which are none. It names the code "<string>", so an audit hook gives the
    code, and the code nested in it, the module's path before it runs."""
    sys.addaudithook(_name_compiled_code)
    _names_pending.append(path)
    try:
        exec(source, namespace)  # noqa: S102 - running the reviewed module is the point
    finally:
        _names_pending.clear()


def _run_check(check: object) -> object:
    code = getattr(check, "__code__", None)
    if code is not None and code.co_flags & CO_COROUTINE:
        import asyncio  # only async checks pay for asyncio

        return asyncio.run(check(AsyncCtx()))  # type: ignore[operator]
    return check(Ctx())  # type: ignore[operator]


def _verdict(result: object) -> tuple[bytes, bytes]:
    if type(result) is not dict or not RESULT_KEYS.issuperset(result) or "ok" not in result:
        return OP_INVALID, b"shape"
    ok, message = result["ok"], result.get("message")
    if type(ok) is not bool or (message is not None and type(message) is not str):
        return OP_INVALID, b"types"
    verdict = b"1" if ok else b"0"
    if message is None:
        return OP_DONE, verdict
    return OP_DONE, verdict + b"\0" + _within_limit(message.encode("utf-8", "replace"))


def _within_limit(encoded: bytes) -> bytes:
    """The spec bounds a message, not the check: keep its first 4 KiB on a character
    boundary and say that it was cut."""
    if len(encoded) <= MESSAGE_LIMIT_BYTES:
        return encoded
    room = MESSAGE_LIMIT_BYTES - len(MESSAGE_CUT_NOTE)
    return encoded[:room].decode("utf-8", "ignore").encode("utf-8") + MESSAGE_CUT_NOTE


def _limit_hit(error: BaseException | None) -> bytes:
    """The limit behind an exception or one of its causes, or b"" (a generic failure)."""
    for _ in range(_CAUSES_SEARCHED):
        if error is None:
            break
        if isinstance(error, MemoryError):
            return LIMIT_MEMORY
        if isinstance(error, OSError) and error.errno in _ERRNO_LIMITS:
            return _ERRNO_LIMITS[error.errno]
        if type(error) is RuntimeError and "can't start new thread" in str(error):
            return LIMIT_THREADS
        error = error.__cause__ or error.__context__
    return b""


def _flush_logs() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib would cost start-up time
            stream.flush()
        except BaseException:  # noqa: S110 - a broken log stream must not hide the verdict
            pass


def main() -> None:
    _start()
    try:
        check = _load_check()
    except BaseException:
        _flush_logs()
        _send(OP_IMPORT_FAILED)
        posix._exit(0)
    _send(OP_LOADED)
    try:
        op, data = _verdict(_run_check(check))
    except BaseException as error:
        op, data = OP_RAISED, _limit_hit(error)
    _flush_logs()
    _send(op, data)
    posix._exit(0)


if __name__ == "__main__":
    main()
