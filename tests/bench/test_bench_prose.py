"""Benchmark: the prose parser on 1 MiB inputs built to make regex backtracking explode.

The reference's compact-form and host-heading patterns are cubic and quadratic on these; the
producer keeps their meaning in linear time. Prints the seconds each case took.
"""

from __future__ import annotations

import time

import pytest
from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow.prose import ParseScope, parse_findings

SCOPE = ParseScope("review-b", "implementation", "codex", 1, "b" * 40, "a" * 40, anchor_side="head")
COMPACT = "[P1, confidence 75, introduced=true] "


def fill(prefix: str, unit: str, suffix: str = "") -> str:
    room = FLOW_PRODUCER.review_text_bytes - len((prefix + suffix).encode())
    return prefix + unit * (room // len(unit.encode())) + suffix


CASES = {
    "compact-blanks": fill(COMPACT, " ", "x"),
    "compact-blank-dashes": fill(COMPACT + "x", " \u2014"),
    "heading-dashed-word": fill("", "a-", " \u00b7 confidence 75 \u00b7 introduced"),
    "heading-repeated": fill("", "a \u00b7 confidence "),
    "short-lines": fill("", "a\n"),
    "field-lines": fill("", "Finding: x\n"),
}


@pytest.mark.bench
@pytest.mark.parametrize("name", sorted(CASES))
def test_bench_prose_worst_cases(name: str) -> None:
    text = CASES[name]
    assert len(text.encode()) <= FLOW_PRODUCER.review_text_bytes
    started = time.perf_counter()
    parse_findings(text, SCOPE)
    print(f"{name}: {time.perf_counter() - started:.2f} s for {len(text.encode())} bytes")
