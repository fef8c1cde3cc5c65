"""The pure budget rules of walks: the export's limits and deadline, and listings that stop."""

from __future__ import annotations

import pytest
from forkhorse.domain.limits import EXPORT, SNAPSHOT, ExportLimits
from forkhorse.domain.snapshot import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LISTED_PATHS,
    DEFAULT_MAX_OPERATIONS,
    MAX_PATH_LEVELS,
    BudgetExceeded,
    CapabilityRevoked,
    ExportBudget,
    ExportLimitExceeded,
    ExportTimedOut,
    SnapshotBudget,
)


class FakeClock:
    """A clock the test moves by hand, so no assertion depends on the wall clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_snapshot_constants_are_the_limits_module() -> None:
    assert (
        SNAPSHOT.read_bytes,
        SNAPSHOT.listed_paths,
        SNAPSHOT.operations,
    ) == (DEFAULT_MAX_BYTES, DEFAULT_MAX_LISTED_PATHS, DEFAULT_MAX_OPERATIONS)
    assert MAX_PATH_LEVELS == SNAPSHOT.path_levels == 64
    assert (EXPORT.paths, EXPORT.bytes, EXPORT.path_levels) == (50_000, 512 * 1024 * 1024, 256)


def test_paths_at_the_limit_then_one_past() -> None:
    budget = ExportBudget(ExportLimits(paths=3))
    for _ in range(3):
        budget.charge_path(1)
    with pytest.raises(ExportLimitExceeded) as refused:
        budget.charge_path(1)
    assert str(refused.value) == "The checkout exceeds the export limit of 3 paths."
    assert budget.paths == 3


def test_bytes_at_the_limit_then_one_past() -> None:
    budget = ExportBudget(ExportLimits(bytes=10))
    budget.charge_bytes(10)
    with pytest.raises(ExportLimitExceeded) as refused:
        budget.charge_bytes(1)
    assert str(refused.value) == "The checkout exceeds the export limit of 10 bytes."
    assert budget.bytes == 10


def test_levels_past_the_limit_are_refused() -> None:
    budget = ExportBudget(ExportLimits(path_levels=2))
    budget.charge_path(2)
    with pytest.raises(ExportLimitExceeded, match="2 levels"):
        budget.charge_path(3)


def test_the_default_message_names_the_default_limit() -> None:
    budget = ExportBudget()
    budget.paths = EXPORT.paths
    with pytest.raises(ExportLimitExceeded) as refused:
        budget.charge_path(1)
    assert str(refused.value) == "The checkout exceeds the export limit of 50,000 paths."


def test_the_deadline_is_checked_before_every_entry() -> None:
    clock = FakeClock()
    budget = ExportBudget(deadline=clock.now + 5, clock=clock)
    budget.charge_path(1)
    clock.now += 4.999
    budget.charge_path(1)
    clock.now += 0.001
    with pytest.raises(ExportTimedOut):
        budget.charge_path(1)
    assert budget.paths == 2


def test_no_deadline_never_times_out() -> None:
    clock = FakeClock()
    budget = ExportBudget(clock=clock)
    clock.now = 1e12
    budget.charge_path(1)


def test_ensure_listed_paths_reserves_nothing() -> None:
    budget = SnapshotBudget(max_listed_paths=5)
    budget.reserve_listed_paths(3)
    budget.ensure_listed_paths(2)
    assert budget.used_listed_paths == 3
    with pytest.raises(BudgetExceeded, match="5 listed paths"):
        budget.ensure_listed_paths(3)
    assert budget.used_listed_paths == 3
    budget.revoke()
    with pytest.raises(CapabilityRevoked):
        budget.ensure_listed_paths(0)
