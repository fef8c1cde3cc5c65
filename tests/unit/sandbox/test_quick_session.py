"""The parent side of a quick check, with an in-memory snapshot: revocation, late results, logs.

These use SHORT deadlines (1 s, passed explicitly as Limits) to exercise the parent's deadline
logic quickly; the real 10-second deadline is exercised in tests/integration/sandbox.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time

import pytest
from forkhorse.adapters.sandbox.bwrap import BubblewrapMissing, BwrapLauncher, BwrapSandbox
from forkhorse.adapters.sandbox.mock import MockSandbox
from forkhorse.adapters.sandbox.runtime import current_runtime
from forkhorse.adapters.sandbox.seccomp import filter_program
from forkhorse.adapters.sandbox.session import Limits, run_quick_check
from forkhorse.domain.checks import QuickCheckDef, quick_module_digest
from forkhorse.domain.logs import LogSample, bound_log
from forkhorse.domain.snapshot import CapabilityRevoked
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.sandbox.fakes import MemorySnapshot

MODULE = ".forkhorse/quick/probe.py"
SHORT = Limits(deadline_seconds=1.0)


def definition() -> QuickCheckDef:
    return QuickCheckDef(name="probe", module=MODULE)


@given(st.binary(max_size=200_000), st.lists(st.integers(1, 70_000), max_size=40))
@settings(max_examples=60, deadline=None)
def test_streaming_capture_equals_bound_log_of_the_whole_stream(
    data: bytes, cuts: list[int]
) -> None:
    capture = LogSample()
    position = 0
    for cut in cuts:
        capture.feed(data[position : position + cut])
        position += cut
    capture.feed(data[position:])
    assert capture.bounded() == bound_log(data)


def test_streaming_capture_stays_small_for_megabytes() -> None:
    capture = LogSample()
    for _ in range(256):
        capture.feed(b"z" * 65536)
    log = capture.bounded()
    assert log.total_bytes == 16 * 1024 * 1024
    assert len(log.text) == 32 * 1024


@pytest.mark.sandbox
def test_a_pending_read_is_revoked_at_the_deadline() -> None:
    outcomes: list[str] = []
    snapshot: MemorySnapshot

    def block_until_revoked(path: str) -> None:
        if path != "slow.txt":
            return
        budget = snapshot.budgets[-1]
        started = time.monotonic()
        while not budget.revoked and time.monotonic() - started < 5:
            time.sleep(0.01)
        try:
            budget.ensure_live()
        except CapabilityRevoked:
            outcomes.append("revoked")
            raise
        outcomes.append("delivered")

    source = "def check(ctx):\n    ctx.read('slow.txt')\n    return {'ok': True}\n"
    snapshot = MemorySnapshot({MODULE: source, "slow.txt": "data"}, on_read=block_until_revoked)
    record = BwrapSandbox(limits=SHORT).run_check(snapshot, definition())
    assert record.outcome == "timed-out"
    assert outcomes == ["revoked"]
    assert record.duration_ms is not None
    assert 1000 <= record.duration_ms < 3000


class SurvivingLauncher(BwrapLauncher):
    """A child that survives the kill: it can only deliver its verdict after the deadline."""

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        pass


@pytest.mark.sandbox
def test_a_late_passing_result_cannot_turn_timed_out_into_a_pass() -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is required"
    launcher = SurvivingLauncher(bwrap, current_runtime(), filter_program())
    source = "import time\n\ndef check(ctx):\n    time.sleep(1.5)\n    return {'ok': True}\n"
    snapshot = MemorySnapshot({MODULE: source})
    record = run_quick_check(launcher, snapshot, definition(), "local-bwrap", SHORT)
    assert record.outcome == "timed-out"
    assert all(budget.revoked for budget in snapshot.budgets)


@pytest.mark.sandbox
def test_a_result_just_before_the_deadline_counts() -> None:
    source = "import time\n\ndef check(ctx):\n    time.sleep(0.5)\n    return {'ok': True}\n"
    record = BwrapSandbox(limits=SHORT).run_check(MemorySnapshot({MODULE: source}), definition())
    assert record.outcome == "passed"


@pytest.mark.sandbox
def test_concurrent_ctx_calls_from_threads_are_served_in_order() -> None:
    source = """\
import threading

def check(ctx):
    results = []
    def worker():
        for _ in range(50):
            results.append(ctx.read("a.txt"))
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"ok": results == ["A"] * 200, "message": str(len(results))}
"""
    snapshot = MemorySnapshot({MODULE: source, "a.txt": "A"})
    record = BwrapSandbox().run_check(snapshot, definition())
    assert (record.outcome, record.message) == ("passed", "200")


def test_bubblewrap_missing_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BubblewrapMissing):
        BwrapSandbox()


def test_the_mock_is_always_labelled_as_mocked() -> None:
    source = "def check(ctx):\n    return {'ok': False}\n"
    sandbox = MockSandbox({"probe": "failed"})
    record = sandbox.run_check(MemorySnapshot({MODULE: source}), definition())
    assert (sandbox.evidence, sandbox.platform) == ("mocked-worker-loader", "mock")
    assert (record.platform, record.outcome) == ("mock", "failed")
    assert record.image_digest == quick_module_digest(source)
    passing = MockSandbox().run_check(MemorySnapshot({MODULE: source}), definition())
    assert passing.outcome == "passed"
    missing = MockSandbox().run_check(MemorySnapshot({}), definition())
    assert (missing.outcome, missing.image_digest) == ("infrastructure-error", "")


@pytest.mark.sandbox
def test_sandboxes_run_side_by_side() -> None:
    source = "def check(ctx):\n    return {'ok': ctx.read('a.txt') == 'A'}\n"
    sandbox = BwrapSandbox()
    records = []

    def run() -> None:
        records.append(
            sandbox.run_check(MemorySnapshot({MODULE: source, "a.txt": "A"}), definition())
        )

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [record.outcome for record in records] == ["passed"] * 8
