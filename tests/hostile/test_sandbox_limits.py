"""Sized sandboxes (issue 13, attacks 2 and 5): real bubblewrap and real podman.

Each test runs one attack, asserts what the check record says, and asserts the host-side
ceiling measured from /proc and statvfs, as growth over a baseline taken in the same test.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from forkhorse.adapters.containers.podman import memory_limit_message, space_limit_message
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.adapters.sandbox.programs import node_limits
from forkhorse.domain.checks import QuickCheckDef
from forkhorse.domain.limits import CONTAINER, MIB, QUICK_SANDBOX, format_bytes
from forkhorse.domain.receipts import CheckRecord

from tests.integration.containers.helpers import RunCheck
from tests.support.resources import meminfo_bytes, peak_of, shmem_bytes, used_disk_bytes
from tests.support.sandbox import BRAND, JS_MODULE, MODULE, make_committer

pytestmark = [pytest.mark.sandbox, pytest.mark.podman]

QUICK_SPACE_MESSAGE = (
    f"The check ran out of writable space ({format_bytes(QUICK_SANDBOX.tmpfs_bytes)} in /tmp; "
    "the rest is read-only)."
)


@pytest.fixture(scope="module")
def sandbox() -> BwrapSandbox:
    return BwrapSandbox()


@pytest.fixture
def run_quick(sandbox: BwrapSandbox, tmp_path: Path) -> Callable[[str], CheckRecord]:
    commit = make_committer(tmp_path)

    def run(source: str, module: str = MODULE) -> CheckRecord:
        snapshot = commit({"brand.json": BRAND, module: source}).snapshot
        return sandbox.run_check(snapshot, QuickCheckDef(name="probe", module=module))

    return run


# --- quick checks -------------------------------------------------------------------------


@pytest.mark.parametrize("directory", ["/", "/tmp"])
def test_quick_check_filling_tmpfs_fails_within_its_size(
    run_quick: Callable[[str], CheckRecord], directory: str
) -> None:
    # Unbounded, this allocated 4 GiB of host shared memory and passed.
    source = f"""\
import os

def check(ctx):
    for index in range(256):
        fd = os.open("{directory.rstrip("/")}/fill-%d" % index, os.O_CREAT | os.O_WRONLY, 0o600)
        os.posix_fallocate(fd, 0, 16 * 1024 * 1024)
    return {{"ok": True, "message": "allocated 4 GiB"}}
"""
    with peak_of(shmem_bytes) as shared:
        record = run_quick(source)
    assert (record.outcome, record.message) == ("failed", QUICK_SPACE_MESSAGE)
    assert shared.growth < 32 * MIB


def _sandboxed_python_below(ancestor: int) -> dict[str, str] | None:
    """/proc/<pid>/status of a process in a nested PID namespace descending from `ancestor`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = _status(int(entry))
        except OSError:
            continue
        nested = len(status.get("NSpid", "").split()) > 1
        if nested and status["Name"] != "bwrap" and _descends_from(int(entry), ancestor):
            return status
    return None


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(4):  # python <- bubblewrap's init <- bubblewrap <- this process
        try:
            pid = int(_status(pid)["PPid"])
        except OSError:
            return False
        if pid == ancestor:
            return True
    return False


def test_quick_check_runs_as_nobody_on_the_host_and_rlimit_nproc_binds(
    run_quick: Callable[[str], CheckRecord],
) -> None:
    # Processes are refused by seccomp; threads are tasks too, and RLIMIT_NPROC counts them
    # only for a uid that is not the host's root.
    source = """\
import threading, time

def check(ctx):
    stop = threading.Event()
    started = 0
    try:
        while started < 100:
            threading.Thread(target=stop.wait).start()
            started += 1
    except RuntimeError:
        time.sleep(3)  # long enough for the host to look at this process
        raise
    return {"ok": True, "message": "started %d threads" % started}
"""
    seen: list[dict[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set() and not seen:
            status = _sandboxed_python_below(os.getpid())
            if status is not None and status.get("Threads") == str(QUICK_SANDBOX.processes):
                seen.append(status)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        record = run_quick(source)
    finally:
        done.set()
        watcher.join()
    assert record.outcome == "failed"
    assert record.message == f"The check exceeded its limit of {QUICK_SANDBOX.processes} threads."
    assert seen, "the sandboxed child was never seen at its thread limit"
    nobody = QUICK_SANDBOX.uid
    assert seen[0]["Uid"].split() == [str(nobody)] * 4
    assert seen[0]["Gid"].split() == [str(nobody)] * 4
    assert seen[0]["Groups"] == ""


def _watch_sandboxed_child(seen: list[dict[str, str]], done: threading.Event) -> None:
    """Record the sandboxed child's /proc status and limits (peak VmRSS kept) until done."""
    while not done.is_set():
        status = _sandboxed_python_below(os.getpid())
        # Node 24 names its main thread, so the process's name is no longer "node".
        if status is not None and status.get("Name") in ("node", "MainThread"):
            try:
                limits = Path(f"/proc/{status['Pid']}/limits").read_text()
            except OSError:
                continue
            status["limits"] = limits
            peak = max((_kib(entry.get("VmRSS", "0 kB")) for entry in seen), default=0)
            seen.append({**status, "peakRSS": str(max(peak, _kib(status.get("VmRSS", "0 kB"))))})
        time.sleep(0.02)


def _kib(value: str) -> int:
    return int(value.split()[0]) if value else 0


def _limit(limits: str, name: str) -> str:
    line = next(line for line in limits.splitlines() if line.startswith(name))
    return line[len(name) :].split()[0]


def _watched(run: Callable[[], CheckRecord]) -> tuple[CheckRecord, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []
    done = threading.Event()
    watcher = threading.Thread(target=_watch_sandboxed_child, args=(seen, done), daemon=True)
    watcher.start()
    try:
        record = run()
    finally:
        done.set()
        watcher.join()
    return record, seen


def test_javascript_check_runs_as_nobody_with_the_rlimits_and_the_filter(
    run_quick: Callable[..., CheckRecord],
) -> None:
    """node cannot set its own rlimits: the launcher sets them before it starts."""
    source = """export default async () => {
  for (const until = Date.now() + 2000; Date.now() < until;) {}
  return { ok: false, message: "spun" };
};
"""
    record, seen = _watched(lambda: run_quick(source, JS_MODULE))
    assert (record.outcome, record.message) == ("failed", "spun")
    assert seen, "the sandboxed node was never seen"
    status = seen[-1]
    nobody = str(QUICK_SANDBOX.uid)
    assert status["Uid"].split() == [nobody] * 4
    assert status["Seccomp"] == "2"
    assert status["NoNewPrivs"] == "1"
    limits = status["limits"]
    space = node_limits(QUICK_SANDBOX).address_space_bytes  # room for V8's code range
    assert _limit(limits, "Max address space") == str(space)
    assert _limit(limits, "Max processes") == str(QUICK_SANDBOX.processes)
    assert _limit(limits, "Max open files") == str(QUICK_SANDBOX.open_files)
    assert _limit(limits, "Max file size") == str(QUICK_SANDBOX.file_size_bytes)
    assert _limit(limits, "Max cpu time") == str(QUICK_SANDBOX.cpu_seconds)
    assert int(status["Threads"]) <= QUICK_SANDBOX.processes


def test_javascript_heap_exhaustion_stops_at_the_heap_limit(
    run_quick: Callable[..., CheckRecord],
) -> None:
    source = """export default async () => {
  const hoard = [];
  for (;;) hoard.push(new Array(100_000).fill(1.5));
};
"""
    record, seen = _watched(lambda: run_quick(source, JS_MODULE))
    heap = format_bytes(QUICK_SANDBOX.heap_bytes)
    assert (record.outcome, record.message) == (
        "failed",
        f"The check exceeded its JavaScript heap limit of {heap}.",
    )
    assert seen, "the sandboxed node was never seen"
    peak = max(int(entry["peakRSS"]) for entry in seen) * 1024
    # The heap limit plus node's own code and buffers; far below the 1 GiB address space.
    assert peak < QUICK_SANDBOX.heap_bytes + 256 * MIB


# --- full checks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "fallocate -l 3G /workspace/x",
        "dd if=/dev/zero of=/workspace/x bs=1M count=3072",
        "dd if=/dev/zero of=/tmp/x bs=1M count=3072",
    ],
    ids=["fallocate-workspace", "dd-workspace", "dd-tmp"],
)
def test_full_check_cannot_fill_the_host_disk(
    run_check: RunCheck, tmp_path: Path, command: str
) -> None:
    with (
        peak_of(lambda: used_disk_bytes(tmp_path), interval=0.05) as disk,
        peak_of(shmem_bytes, interval=0.05) as shared,
    ):
        attempt = run_check(command)
    result = attempt.result
    assert result.outcome == "failed"
    assert result.message == f"{space_limit_message(CONTAINER)} Exited with code 1."
    # Nothing lands on the host's disk; the tmpfs pages stay within the workspace size.
    assert disk.growth < 256 * MIB
    assert shared.growth < CONTAINER.workspace_bytes + 64 * MIB


def test_full_check_cannot_create_a_user_namespace(run_check: RunCheck) -> None:
    attempt = run_check("unshare -U true && echo CREATED; unshare -U -r true")
    assert attempt.result.outcome == "failed"
    assert "CREATED" not in attempt.result.stdout.text
    assert "unshare" in attempt.result.stderr.text


def _processes_with(marker: bytes) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        try:
            count += marker in Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
    return count


def test_full_check_fork_bomb_stops_at_the_pids_limit(run_check: RunCheck) -> None:
    with peak_of(lambda: _processes_with(b"sleep 4646"), interval=0.05) as processes:
        attempt = run_check(
            "i=0; while [ $i -lt 100000 ]; do sleep 4646 & i=$((i+1)); done; echo FINISHED"
        )
    assert attempt.result.outcome == "failed"
    assert "FINISHED" not in attempt.result.stdout.text
    assert "can't fork" in attempt.result.stderr.text
    assert processes.peak <= CONTAINER.pids
    assert _processes_with(b"sleep 4646") == 0


def test_full_check_out_of_memory_names_the_memory_limit(run_check: RunCheck) -> None:
    # Holding 2 GB in a shell variable needs more than the 1 GiB limit.
    with peak_of(used_memory_bytes, interval=0.05) as memory:
        attempt = run_check("x=$(head -c 2000000000 /dev/zero | tr '\\0' x); echo HELD")
    assert attempt.result.outcome == "failed"
    assert "HELD" not in attempt.result.stdout.text
    assert attempt.result.message == f"{memory_limit_message(CONTAINER)} Exited with code 137."
    # Unbounded, the shell holds 2 GB plus its copies; other work on the host is the margin.
    assert memory.growth < CONTAINER.memory_bytes + 768 * MIB


def used_memory_bytes() -> int:
    return meminfo_bytes("MemTotal") - meminfo_bytes("MemAvailable")
