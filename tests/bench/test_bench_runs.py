"""Receipt-run benchmarks through the local supervisor, with ratios measured in one run.

- A quick-only receipt, from the start request to the attached digest.
- One quick plus one full check, against the sum of its bare parts: a bare interpreter start
  (`python3 -I -S -c pass`) plus a bare `podman run --rm <image> true`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest

from tests.integration.runner.scenarios import (
    BRAND,
    PASSING_QUICK,
    checks_file,
    full,
    quick,
)
from tests.support.bench import BenchFigures
from tests.support.runner import World

ROUNDS = 7
PODMAN_FLAGS = (
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=512:512",
    "--network",
    "none",
)


def _receipt_seconds(world: World, files: dict[str, str]) -> float:
    run = world.review(files)
    started = time.perf_counter()
    world.run(run)
    elapsed = time.perf_counter() - started
    assert world.summary(run.review_id).digest is not None
    return elapsed


def _command_seconds(*command: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def _median(measure: object, rounds: int = ROUNDS) -> float:
    return statistics.median(measure() for _ in range(rounds))  # type: ignore[operator]


@pytest.mark.bench
def test_bench_receipt_runs(world: World, busybox_ref: str, bench_figures: BenchFigures) -> None:
    quick_only = {
        "brand.json": BRAND,
        ".forkhorse/quick/brand.py": PASSING_QUICK,
        ".forkhorse/checks": checks_file(quick("brand", "brand")),
    }
    mixed = {
        **quick_only,
        ".forkhorse/checks": checks_file(quick("brand", "brand"), full("t", "true")),
    }
    quick_receipt = _median(lambda: _receipt_seconds(world, quick_only))
    mixed_receipt = _median(lambda: _receipt_seconds(world, mixed))
    bare_python = _median(lambda: _command_seconds(sys.executable, "-I", "-S", "-c", "pass"))
    bare_podman = _median(
        lambda: _command_seconds("podman", "run", "--rm", *PODMAN_FLAGS, busybox_ref, "true")
    )
    parts = bare_python + bare_podman
    print(
        f"\nquick-only receipt, request to attached digest: {quick_receipt * 1000:.0f} ms"
        f"\nquick+full receipt: {mixed_receipt * 1000:.0f} ms;"
        f" bare python {bare_python * 1000:.0f} ms + bare podman run {bare_podman * 1000:.0f} ms"
        f" = {parts * 1000:.0f} ms; ratio {mixed_receipt / parts:.2f}x"
    )
    bench_figures.record("receipt", mixed_receipt / parts)
    assert quick_receipt < 5.0
    assert mixed_receipt / parts < 10.0, "a regression: the run costs far more than its parts"
