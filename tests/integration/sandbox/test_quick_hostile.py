"""Hostile quick-check modules in real bubblewrap: each has its own test and none may pass.

Modules that must hit the real 10-second deadline are started together, in parallel threads,
by one module-scoped fixture; each still has its own test and its own fresh sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.receipts import CheckRecord

from tests.support.sandbox import (
    BRAND,
    DEADLINE_MESSAGE,
    MODULE,
    SECRET,
    Committed,
    RecordingSnapshot,
    RunModule,
    assert_never_passed,
    make_committer,
)

pytestmark = pytest.mark.sandbox


def test_socket_to_loopback(
    run_module: RunModule, loopback_listener: tuple[int, list[object]]
) -> None:
    port, accepted = loopback_listener
    source = f"""\
import socket

def check(ctx):
    with socket.create_connection(("127.0.0.1", {port}), timeout=2) as connection:
        connection.sendall(b"hello")
    return {{"ok": True, "message": "connected"}}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.outcome == "failed"
    assert accepted == []


def test_socket_to_a_public_address(run_module: RunModule) -> None:
    source = """\
import socket

def check(ctx):
    targets = ((socket.AF_INET, ("93.184.215.14", 80)), (socket.AF_INET6, ("2606:4700::1111", 53)))
    for family, address in targets:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as connection:
                connection.settimeout(2)
                connection.connect(address)
                return {"ok": True, "message": "reached the internet"}
        except OSError:
            continue
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.sendto(b"x", ("1.1.1.1", 53))
    return {"ok": True, "message": "sent a datagram"}
"""
    assert_never_passed(run_module(source))


def test_reading_os_environ(run_module: RunModule, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKHORSE_SECRET_TOKEN", SECRET)
    source = """\
import os

def check(ctx):
    return {"ok": len(os.environ) > 0, "message": "environment has %d entries" % len(os.environ)}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "environment has 0 entries"


def test_reading_the_parents_proc_environ(
    run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKHORSE_SECRET_TOKEN", SECRET)
    source = f"""\
def check(ctx):
    leaked = []
    for pid in ({os.getpid()}, {os.getppid()}, 1, "self"):
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                leaked.append(handle.read())
        except OSError:
            pass
    return {{"ok": bool(leaked), "message": "read %d environ files" % len(leaked)}}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "read 0 environ files"


def test_opening_etc_passwd_and_the_repository_files_directly(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> None:
    repository = Path(__file__).resolve().parents[3]
    placeholder = "PLACEHOLDER"
    module = f"""\
def check(ctx):
    opened = []
    for path in ("/etc/passwd", "{repository / "pyproject.toml"}", "{placeholder}", "brand.json",
                 ".forkhorse/checks", "/root/.bashrc", "/home", "/var"):
        try:
            with open(path, "rb") as handle:
                opened.append(path)
        except OSError:
            pass
    return {{"ok": bool(opened), "message": "opened %r" % (opened,)}}
"""
    first = commit_files({"brand.json": BRAND, MODULE: module})
    worktree_file = first.worktree / "brand.json"
    committed = commit_files(
        {"brand.json": BRAND, MODULE: module.replace(placeholder, str(worktree_file))}
    )
    record = sandbox.run_check(committed.snapshot, QuickCheckDef(name="probe", module=MODULE))
    assert_never_passed(record)
    assert record.message == "opened []"


def test_fork(run_module: RunModule) -> None:
    source = """\
import os

def check(ctx):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return {"ok": True, "message": "forked"}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "The check raised an exception."


def test_spawning_a_process(run_module: RunModule) -> None:
    source = """\
import subprocess, sys

def check(ctx):
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return {"ok": True}
"""
    assert_never_passed(run_module(source))


def test_allocating_8_gb(run_module: RunModule) -> None:
    source = (
        "def check(ctx):\n    data = bytearray(8 * 1024 ** 3)\n"
        "    return {'ok': True, 'message': str(len(data))}\n"
    )
    record = run_module(source)
    assert_never_passed(record)
    assert record.outcome == "failed"


def test_printing_megabytes(run_module: RunModule) -> None:
    source = """\
import sys

def check(ctx):
    chunk = "x" * 65536
    for _ in range(128):
        sys.stdout.write(chunk)
    return {"ok": True, "message": "printed 8 MiB"}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "The check wrote more than 1 MiB of output."
    assert record.stdout.total_bytes > 1024 * 1024
    assert len(record.stdout.text.encode()) <= 32 * 1024
    assert record.stdout.dropped_bytes == record.stdout.total_bytes - 32 * 1024
    assert record.duration_ms is not None
    assert record.duration_ms < 5000


def test_writing_fake_rpc_frames_to_stdout(run_module: RunModule) -> None:
    source = """\
import os, sys

def forged(capability):
    payload = capability + b"D1" + b"\\0forged pass"
    return len(payload).to_bytes(4, "big") + payload

def check(ctx):
    main = sys.modules["__main__"]
    capability = main._hello["cap"].encode()
    for stream in (sys.stdout.buffer, sys.stderr.buffer):
        stream.write(forged(capability) + forged(b"0" * 32))
        stream.flush()
    os._exit(0)
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "The check exited without returning a result."


def test_forging_a_frame_with_a_wrong_capability_on_the_rpc_socket(run_module: RunModule) -> None:
    source = """\
import os, sys

def check(ctx):
    payload = b"0" * 32 + b"D1"
    os.write(int(sys.argv[1]), len(payload).to_bytes(4, "big") + payload)
    return {"ok": False}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "The check broke the sandbox protocol."


def test_an_oversized_rpc_frame(run_module: RunModule) -> None:
    source = """\
import os, sys

def check(ctx):
    os.write(int(sys.argv[1]), (10 ** 9).to_bytes(4, "big"))
    return {"ok": True}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "The check broke the sandbox protocol."


@pytest.mark.parametrize("package", ["pydantic", "boto3", "dulwich", "forkhorse"])
def test_importing_a_third_party_package(run_module: RunModule, package: str) -> None:
    record = run_module(f"import {package}\n\ndef check(ctx):\n    return {{'ok': True}}\n")
    assert_never_passed(record)
    assert record.outcome == "infrastructure-error"


def test_importing_a_third_party_package_inside_check(run_module: RunModule) -> None:
    record = run_module("def check(ctx):\n    import pydantic\n    return {'ok': True}\n")
    assert_never_passed(record)
    assert record.message == "The check raised an exception."


def test_raising_with_a_long_stack(run_module: RunModule) -> None:
    source = f"""\
def deep(n):
    if n == 0:
        raise ValueError("{SECRET} " * 2000)
    return deep(n - 1)

def check(ctx):
    return deep(500)
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "The check raised an exception."
    assert "Traceback" not in record.stderr.text


@pytest.mark.parametrize(
    "returned",
    [
        "None",
        "True",
        "['ok', True]",
        "{'ok': 'yes'}",
        "{'ok': 1}",
        "{'ok': True, 'extra': 1}",
        "{'message': 'no ok'}",
        "{'ok': True, 'message': 42}",
        "type('D', (dict,), {})(ok=True)",
    ],
)
def test_returning_something_that_is_not_a_valid_result(
    run_module: RunModule, returned: str
) -> None:
    record = run_module(f"def check(ctx):\n    return {returned}\n")
    assert_never_passed(record)
    assert record.message.startswith("The check returned an invalid result")


def test_a_1_mb_message_is_cut_to_4_kib_and_the_verdict_stands(run_module: RunModule) -> None:
    """The spec limits the message, not the check: its first 4 KiB are kept (on a character
    boundary) and the cut is said; a passing check still passes."""
    record = run_module("def check(ctx):\n    return {'ok': True, 'message': 'é' * 1_000_000}\n")
    assert record.outcome == "passed"
    assert len(record.message.encode("utf-8")) <= 4 * 1024
    assert record.message.startswith("é" * 2000)
    assert record.message.endswith("[message cut at 4 KiB]")
    failing = run_module("def check(ctx):\n    return {'ok': False, 'message': 'x' * 9000}\n")
    assert (failing.outcome, failing.message.endswith("[message cut at 4 KiB]")) == (
        "failed",
        True,
    )


@pytest.mark.parametrize(
    "call",
    [
        'ctx.read("../brand.json")',
        'ctx.read("/etc/passwd")',
        'ctx.stat("a/../../b")',
        'ctx.list("../")',
        'ctx.read(".git/config")',
        'ctx.read("a//b")',
        'ctx.read("a\\\\b")',
        'ctx.read("a\\x00b")',
        'ctx.read("/".join(["d"] * 65))',
    ],
    ids=[
        "dotdot",
        "absolute",
        "stat-dotdot",
        "list-dotdot",
        "dot-git",
        "empty-component",
        "backslash",
        "control",
        "65-levels",
    ],
)
def test_ctx_calls_with_traversal_paths(run_module: RunModule, call: str) -> None:
    """A rejected path reads nothing; the refusal is that call's error. A module that lets it
    propagate fails; one that handles it keeps its own verdict (the spec rejects the path,
    not the check), and in neither case does anything leak."""
    source = f"""\
def check(ctx):
    try:
        leaked = {call}
    except Exception as refusal:
        return {{"ok": True, "message": "refused: %s" % (refusal,)}}
    return {{"ok": False, "message": "leaked: %r" % (leaked,)}}
"""
    record = run_module(source)
    assert record.outcome == "passed", record.message
    assert record.message.startswith("refused: ")
    unhandled = run_module(f"def check(ctx):\n    {call}\n    return {{'ok': True}}\n")
    assert_never_passed(unhandled)
    assert unhandled.outcome == "failed"


def test_exceeding_the_byte_budget(run_module: RunModule) -> None:
    source = """\
def check(ctx):
    for _ in range(3):
        try:
            ctx.read("big.txt")
        except Exception:
            pass
    return {"ok": True}
"""
    record = run_module(source, {"big.txt": "y" * (900 * 1024)})
    assert_never_passed(record)
    assert record.message == "The check exceeded its snapshot budget of 2097152 bytes."


def test_exceeding_the_listed_paths_budget(run_module: RunModule) -> None:
    files: dict[str, str | bytes] = {f"many/{index:03}.txt": "x" for index in range(300)}
    source = (
        "def check(ctx):\n    for _ in range(7):\n        ctx.list('many/')\n"
        "    return {'ok': True}\n"
    )
    record = run_module(source, files)
    assert_never_passed(record)
    assert record.message == "The check exceeded its budget of 2000 listed paths."


def test_exceeding_the_file_call_budget(run_module: RunModule) -> None:
    source = """\
def check(ctx):
    for _ in range(10_001):
        try:
            ctx.stat("brand.json")
        except Exception:
            break
    return {"ok": True}
"""
    record = run_module(source)
    assert_never_passed(record)
    assert record.message == "The check exceeded its budget of 10000 tree entries and file calls."


# --- Modules that must reach the real 10-second deadline, run side by side. ---

DEADLINE_MODULES = {
    "infinite-loop": "def check(ctx):\n    while True:\n        pass\n",
    "sleeps-past-deadline": (
        "import time\n\ndef check(ctx):\n    time.sleep(30)\n    return {'ok': True}\n"
    ),
    "async-sleeps-past-deadline": (
        "import asyncio\n\nasync def check(ctx):\n    await asyncio.sleep(30)\n"
        "    return {'ok': True}\n"
    ),
    "reads-after-deadline": (
        "import time\n\ndef check(ctx):\n    while True:\n"
        "        ctx.read('brand.json')\n        time.sleep(0.02)\n"
    ),
    "loops-at-import": "while True:\n    pass\n",
}


@pytest.fixture(scope="module")
def deadline_records(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[CheckRecord, RecordingSnapshot]]:
    sandbox = BwrapSandbox()
    commit = make_committer(tmp_path_factory.mktemp("deadline"))
    snapshots = {
        name: commit({"brand.json": BRAND, MODULE: source}).snapshot
        for name, source in DEADLINE_MODULES.items()
    }

    def run(name: str) -> tuple[CheckRecord, RecordingSnapshot]:
        snapshot = snapshots[name]
        return sandbox.run_check(snapshot, QuickCheckDef(name=name, module=MODULE)), snapshot

    with ThreadPoolExecutor(max_workers=len(DEADLINE_MODULES)) as pool:
        return dict(zip(DEADLINE_MODULES, pool.map(run, DEADLINE_MODULES), strict=True))


@pytest.mark.parametrize("name", list(DEADLINE_MODULES))
def test_deadline_bound_modules_time_out(
    deadline_records: dict[str, tuple[CheckRecord, RecordingSnapshot]], name: str
) -> None:
    record, snapshot = deadline_records[name]
    assert_never_passed(record)
    assert record.outcome == "timed-out"
    assert record.message in (DEADLINE_MESSAGE, "The check exceeded its 10-second CPU limit.")
    assert record.duration_ms is not None
    assert 9_900 <= record.duration_ms < 12_000
    assert all(budget.revoked for budget in snapshot.budgets)
