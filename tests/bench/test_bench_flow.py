"""Benchmark: current-findings selection over a 50-generation lineage of 200 items each.

The reference keeps p95 under 100 ms; this prints p50/p95 and the ratio to that budget.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import time
from pathlib import Path
from types import ModuleType

import pytest
from forkhorse.flow.currentness import select_current

GENERATIONS = 50
ITEMS = 200
RUNS = 40
REFERENCE_P95_SECONDS = 0.100


def _factories() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "unit" / "flow" / "flow_factories.py"
    spec = importlib.util.spec_from_file_location("flow_factories_bench", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.bench
def test_bench_current_findings_selection() -> None:
    factories = _factories()
    receipts = [factories.receipt(c) for c in factories.chain(GENERATIONS, ITEMS)]
    random.Random(7).shuffle(receipts)
    timings, cpu_timings = [], []
    for _ in range(RUNS):
        start, cpu_start = time.perf_counter(), time.process_time()
        selection = select_current(
            receipts, head_sha=factories.HEAD, review_kind="implementation", backend="codex"
        )
        timings.append(time.perf_counter() - start)
        cpu_timings.append(time.process_time() - cpu_start)
        assert selection.tip is not None
        assert selection.tip["sourceReceiptId"] == f"gen-{GENERATIONS}"
        assert len(selection.chain) == GENERATIONS
    p50 = statistics.median(timings)
    p95 = statistics.quantiles(timings, n=20)[-1]
    cpu_p95 = statistics.quantiles(cpu_timings, n=20)[-1]
    print(
        f"\nflow currentness {GENERATIONS}x{ITEMS}: wall p50 {p50 * 1000:.1f} ms, "
        f"p95 {p95 * 1000:.1f} ms (p95/reference-budget {p95 / REFERENCE_P95_SECONDS:.2f}); "
        f"cpu p50 {statistics.median(cpu_timings) * 1000:.1f} ms, p95 {cpu_p95 * 1000:.1f} ms"
    )
    assert p95 < REFERENCE_P95_SECONDS * 10  # generous ceiling for loaded CI machines
