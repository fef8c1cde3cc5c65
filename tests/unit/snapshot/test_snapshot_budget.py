"""Budgets: exactly at each limit passes, one past fails; concurrency cannot overrun."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from forkhorse.domain.snapshot import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LISTED_PATHS,
    DEFAULT_MAX_OPERATIONS,
    BudgetExceeded,
    CapabilityRevoked,
    SnapshotBudget,
)

LIMITS: list[tuple[str, int, Callable[[SnapshotBudget, int], None], str]] = [
    ("bytes", DEFAULT_MAX_BYTES, SnapshotBudget.reserve_bytes, "used_bytes"),
    (
        "listed paths",
        DEFAULT_MAX_LISTED_PATHS,
        SnapshotBudget.reserve_listed_paths,
        "used_listed_paths",
    ),
    ("operations", DEFAULT_MAX_OPERATIONS, SnapshotBudget.reserve_operations, "used_operations"),
]


def test_the_spec_limits() -> None:
    assert (DEFAULT_MAX_BYTES, DEFAULT_MAX_LISTED_PATHS, DEFAULT_MAX_OPERATIONS) == (
        2 * 1024 * 1024,
        2_000,
        10_000,
    )


@pytest.mark.parametrize(("name", "limit", "reserve", "used"), LIMITS, ids=[x[0] for x in LIMITS])
def test_exactly_at_the_limit_then_one_past(
    name: str, limit: int, reserve: Callable[[SnapshotBudget, int], None], used: str
) -> None:
    budget = SnapshotBudget()
    reserve(budget, limit - 1)
    reserve(budget, 1)
    assert getattr(budget, used) == limit
    with pytest.raises(BudgetExceeded):
        reserve(budget, 1)
    assert getattr(budget, used) == limit  # a refused reservation takes nothing


@pytest.mark.parametrize(("name", "limit", "reserve", "used"), LIMITS, ids=[x[0] for x in LIMITS])
def test_one_oversized_reservation_takes_nothing(
    name: str, limit: int, reserve: Callable[[SnapshotBudget, int], None], used: str
) -> None:
    budget = SnapshotBudget()
    with pytest.raises(BudgetExceeded):
        reserve(budget, limit + 1)
    assert getattr(budget, used) == 0
    reserve(budget, limit)


def test_concurrent_reservations_cannot_overrun() -> None:
    budget = SnapshotBudget(max_bytes=1_000)
    granted: list[int] = []
    barrier = threading.Barrier(16)

    def worker() -> None:
        barrier.wait()
        for _ in range(200):
            try:
                budget.reserve_bytes(7)
            except BudgetExceeded:
                continue
            granted.append(7)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == budget.used_bytes == 994  # 142 grants of 7; never past 1,000


def test_revoke_stops_every_later_call() -> None:
    budget = SnapshotBudget()
    budget.reserve_operations(1)
    budget.revoke()
    for call in (budget.reserve_bytes, budget.reserve_listed_paths, budget.reserve_operations):
        with pytest.raises(CapabilityRevoked):
            call(1)
    with pytest.raises(CapabilityRevoked):
        budget.ensure_live()
    assert budget.revoked


def test_negative_reservations_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="negative"):
        SnapshotBudget().reserve_bytes(-1)
