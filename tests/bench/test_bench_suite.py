"""The suite's own start-up: the CPU a pytest session spends before and around a handful of
unit tests (issue 27: at most 2 s). Each run is a fresh interpreter, so the figure is what
a developer pays for every `pytest tests/unit/...` in the inner loop."""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench import BenchFigures

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 5


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _session_cpu(*args: str) -> float:
    before = _children_cpu()
    subprocess.run([sys.executable, *args], cwd=ROOT, check=True, capture_output=True)
    return _children_cpu() - before


def test_a_unit_session_starts_within_two_seconds_of_cpu(bench_figures: BenchFigures) -> None:
    median = statistics.median(
        _session_cpu("-m", "pytest", "-q", "tests/unit/gate") for _ in range(ROUNDS)
    )
    bare = statistics.median(_session_cpu("-c", "pass") for _ in range(ROUNDS))
    print(f"\npytest tests/unit/gate: {median:.2f} s CPU (median of {ROUNDS}), bare {bare:.3f} s")
    bench_figures.record("pytest-startup", median)
