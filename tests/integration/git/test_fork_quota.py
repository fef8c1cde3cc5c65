"""A fork's storage ledger and ref quota (`adapters/git/quota.py`) and the geometric choice
of packs a consolidation merges (`adapters/git/repack.py`), on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from forkhorse.adapters.git.quota import (
    LEDGER_NAME,
    ForkQuota,
    QuotaExceeded,
    StorageLedger,
    fork_storage_limits,
)
from forkhorse.adapters.git.repack import _base_packs, _Pack
from forkhorse.domain.limits import FORK_STORAGE, ForkStorageLimits

ZERO = b"0" * 40
SHA = b"a" * 40
LIMITS = ForkStorageLimits(bytes=1000, refs=3, ledger_entries=4)


def test_a_charge_past_the_quota_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    ledger = StorageLedger(tmp_path)
    ledger.charge(600, LIMITS, now=1.0)
    before = (tmp_path / LEDGER_NAME).read_bytes()
    with pytest.raises(QuotaExceeded, match="the limit is 1000 bytes per fork"):
        ledger.charge(401, LIMITS, now=2.0)
    assert (tmp_path / LEDGER_NAME).read_bytes() == before
    ledger.charge(400, LIMITS, now=3.0)
    assert ledger.usage() == 1000


def test_the_ledger_stays_bounded_and_never_charges_less(tmp_path: Path) -> None:
    ledger = StorageLedger(tmp_path)
    for index in range(10):
        ledger.charge(10, LIMITS, now=float(index))
    pushes = json.loads((tmp_path / LEDGER_NAME).read_text())["pushes"]
    assert len(pushes) == LIMITS.ledger_entries
    assert sum(size for _, size, _, _ in pushes) == 100
    assert [when for when, _, _, _ in pushes] == [6.0, 7.0, 8.0, 9.0]  # merged: the later time


def test_settling_keeps_young_pushes_by_what_nothing_reaches(tmp_path: Path) -> None:
    ledger = StorageLedger(tmp_path)
    old = ledger.charge(300, LIMITS, now=1.0)
    ledger.name(old, "pack-old")
    young = ledger.charge(200, LIMITS, now=10.0)
    ledger.name(young, "pack-young")
    merged_away = ledger.charge(100, LIMITS, now=11.0)
    ledger.name(merged_away, "pack-gone")
    ledger.charge(50, LIMITS, now=12.0)  # its pack never named (a failed move-in)
    # kept 120 bytes; pack-young holds 80 unreachable bytes; pack-gone is not listed
    ledger.settle(120, cutoff=5.0, unreached={"pack-old": 0, "pack-young": 80})
    assert ledger.usage() == 120 + 80 + 100 + 50


def test_the_ref_quota_counts_created_and_deleted_refs() -> None:
    quota = ForkQuota(lambda: 3, limits=LIMITS)
    quota.check_commands([(SHA, SHA, b"refs/heads/main")])  # an update creates nothing
    quota.check_commands([(ZERO, SHA, b"refs/heads/new"), (SHA, ZERO, b"refs/heads/old")])
    with pytest.raises(QuotaExceeded, match="has 3 refs and this push would leave 4"):
        quota.check_commands([(ZERO, SHA, b"refs/heads/new")])


def test_a_fork_at_its_byte_quota_is_refused_before_its_pack_is_read(tmp_path: Path) -> None:
    ledger = StorageLedger(tmp_path)
    ledger.charge(1000, LIMITS, now=1.0)
    quota = ForkQuota(lambda: 1, ledger, LIMITS)
    with pytest.raises(QuotaExceeded, match="already stores 1000 bytes"):
        quota.check_commands([(SHA, b"b" * 40, b"refs/heads/main")])
    quota.check_commands([(SHA, ZERO, b"refs/heads/main")])  # a deletion is always let in


def test_the_environment_sets_the_quota_for_tests() -> None:
    assert fork_storage_limits({}) == FORK_STORAGE
    environ = {"FORKHORSE_FORK_QUOTA_BYTES": "4096", "FORKHORSE_FORK_QUOTA_REFS": "x"}
    limits = fork_storage_limits(environ)
    assert (limits.bytes, limits.refs) == (4096, FORK_STORAGE.refs)


def _packs(*sizes: int) -> dict[str, _Pack]:
    return {f"p{index}": _Pack([], [], False, size) for index, size in enumerate(sizes)}


def test_a_merge_keeps_the_largest_packs_in_geometric_progression() -> None:
    assert _base_packs(_packs(200, 40, 10, 8, 1), 0) == ["p0", "p1"]  # 10 < 2 x 9
    assert _base_packs(_packs(*[1] * 33), 0) == []  # equal packs: all merge
    assert _base_packs(_packs(1000, 300, 100, 30, 10, 3, 1), 0, most=3) == ["p0", "p1", "p2"]
    assert _base_packs(_packs(100, 10), 60) == []  # what else is replaced counts too
