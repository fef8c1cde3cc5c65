"""Following a receipt: one event as each check starts and ends, in the order they run."""

from __future__ import annotations

from typing import Any

import pytest
from forkhorse.client.follow import CheckEvent, WaitTimedOut, follow
from forkhorse.domain.receipts import ReceiptSummary

STARTED = "2026-01-02T03:04:05.678Z"


def _summary(status: str, *checks: tuple[str, str, str]) -> ReceiptSummary:
    return ReceiptSummary.model_validate(
        {
            "status": status,
            "trigger": "review-created",
            "digest": None,
            "startedAt": STARTED,
            "finishedAt": None,
            "durationMs": None,
            "checks": [
                {"name": name, "tier": tier, "outcome": outcome, "durationMs": None}
                for name, tier, outcome in checks
            ],
        }
    )


def _events(*summaries: ReceiptSummary) -> list[Any]:
    reads = iter(summaries)
    found: list[Any] = []
    for item in follow(lambda: next(reads), poll=0):
        if isinstance(item, CheckEvent):
            found.append((item.check.name, "started" if item.started else item.check.outcome))
        else:
            found.append(item.status)
    return found


def test_checks_start_in_run_order_and_each_ends_once() -> None:
    declared = [("full", "full"), ("q1", "quick"), ("q2", "quick")]
    first = _summary("running", *((n, t, "running") for n, t in declared))
    second = _summary("running", ("full", "full", "running"), ("q1", "quick", "passed"),
                      ("q2", "quick", "running"))  # fmt: skip
    done = _summary("passed", ("full", "full", "passed"), ("q1", "quick", "passed"),
                    ("q2", "quick", "passed"))  # fmt: skip
    assert _events(first, second, second, done) == [
        ("q1", "started"),
        ("q1", "passed"),
        ("q2", "started"),
        ("full", "started"),
        ("full", "passed"),  # (one summary's events come in its listed order)
        ("q2", "passed"),
        "passed",
    ]


def test_a_wait_is_bounded() -> None:
    running = _summary("running")
    with pytest.raises(WaitTimedOut, match=r"still running after 0\.01 s"):
        list(follow(lambda: running, timeout=0.01, poll=0.001))
