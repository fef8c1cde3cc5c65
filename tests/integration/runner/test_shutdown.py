"""Closing a runtime right after a start: the background recovery (orphan cleanup, then
garbage collection over the store) has finished before the store closes. Before, closing
under it crashed the process (SQLite used after close, seen as a segfault by the fuzzer)."""

from __future__ import annotations

from pathlib import Path

from forkhorse.wiring.local import build_local_runtime


def test_closing_waits_for_the_background_recovery(tmp_path: Path) -> None:
    build_local_runtime(tmp_path / "home").close()  # a first start leaves a home behind
    restarted = build_local_runtime(tmp_path / "home")  # recovers in the background
    restarted.close()
    assert restarted.supervisor.recovered(0), "the store closed under the recovery thread"
