"""History on disk: prior generations preserved, conflicting rewrites refused, tip recovery."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from forkhorse.flow.currentness import select_current
from forkhorse.flow.history import (
    HistoryConflict,
    atomic_write_json,
    history_dir,
    history_path,
    read_generations,
    recover_tip,
    restore_latest,
    write_latest,
)
from forkhorse.flow.rules import RuleViolation

from tests.unit.flow.flow_factories import HEAD, chain, receipt, root, successor


@pytest.fixture
def latest(tmp_path: Path) -> Path:
    return tmp_path / ".flow" / "review-receipts" / "feature.json"


def lineage_at(path: Path) -> list[object]:
    return [g.receipt for g in read_generations(path)]


def current_tip(path: Path) -> str | None:
    selection = select_current(
        lineage_at(path), head_sha=HEAD, review_kind="implementation", backend="codex"
    )
    return selection.tip["sourceReceiptId"] if selection.tip else None


def test_prior_generation_is_kept_under_its_hashed_id(latest: Path) -> None:
    gen1, gen2 = chain(2, 3)
    write_latest(latest, receipt(gen1))
    assert not any(history_dir(latest).iterdir())
    write_latest(latest, receipt(gen2))
    kept = history_dir(latest) / (hashlib.sha256(b"gen-1").hexdigest() + ".json")
    assert json.loads(kept.read_text())["findings"] == gen1
    assert json.loads(latest.read_text())["findings"] == gen2
    assert current_tip(latest) == "gen-2"


def test_writing_the_same_receipt_again_is_a_no_op(latest: Path) -> None:
    gen1 = root("gen-1", 1)
    write_latest(latest, receipt(gen1))
    write_latest(latest, receipt(gen1))
    assert not any(history_dir(latest).iterdir())


def test_rewriting_a_generation_with_other_content_is_refused(latest: Path) -> None:
    gen1 = root("gen-1", 1)
    write_latest(latest, receipt(gen1))
    changed = root("gen-1", 2)
    with pytest.raises(HistoryConflict):
        write_latest(latest, receipt(changed))
    assert json.loads(latest.read_text())["findings"] == gen1


def test_conflicting_preserved_generation_is_refused(latest: Path) -> None:
    gen1, gen2, gen3 = chain(3, 1)
    write_latest(latest, receipt(gen1))
    write_latest(latest, receipt(gen2))
    forged = receipt(root("gen-1", 2))
    atomic_write_json(latest, forged)  # someone replaced the latest behind our back
    with pytest.raises(HistoryConflict):
        write_latest(latest, receipt(gen3))
    kept = json.loads(history_path(latest, "gen-1").read_text())
    assert kept["findings"] == gen1


def test_new_latest_reusing_a_preserved_id_with_other_content_is_refused(latest: Path) -> None:
    gen1, gen2 = chain(2, 1)
    write_latest(latest, receipt(gen1))
    write_latest(latest, receipt(gen2))
    with pytest.raises(HistoryConflict):
        write_latest(latest, receipt(root("gen-1", 3)))


def test_invalid_receipts_are_never_written(latest: Path) -> None:
    bad = receipt(root("gen-1", 1))
    bad["findings"]["round"] = True
    with pytest.raises(RuleViolation):
        write_latest(latest, bad)
    assert not latest.exists()


def test_invalid_latest_is_replaced_without_being_preserved(latest: Path) -> None:
    latest.parent.mkdir(parents=True)
    latest.write_text("{not json")
    write_latest(latest, receipt(root("gen-1", 1)))
    assert current_tip(latest) == "gen-1"
    assert not list(history_dir(latest).glob("*.json"))


def test_unique_tip_is_recovered_when_the_latest_file_is_missing(latest: Path) -> None:
    gen1, gen2, gen3 = chain(3, 2)
    for generation in (gen1, gen2, gen3):
        write_latest(latest, receipt(generation))
    latest.unlink()
    assert current_tip(latest) == "gen-2"
    recovered = recover_tip(latest)
    assert recovered is not None
    assert recovered["findings"]["sourceReceiptId"] == "gen-2"
    assert restore_latest(latest)
    assert json.loads(latest.read_text())["findings"] == gen2
    assert current_tip(latest) == "gen-2"  # the restored copy is not a duplicate generation
    write_latest(latest, receipt(successor(gen2, "gen-3b")))
    assert current_tip(latest) == "gen-3b"


def test_no_recovery_without_a_unique_tip(latest: Path) -> None:
    gen1 = root("gen-1", 1)
    for side in ("left", "right"):
        atomic_write_json(history_path(latest, side), receipt(successor(gen1, side)))
    atomic_write_json(history_path(latest, "gen-1"), receipt(gen1))
    assert recover_tip(latest) is None
    assert not restore_latest(latest)
    assert not latest.exists()


def test_nothing_at_all_is_an_io_error(latest: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_generations(latest)


def test_crash_between_history_and_latest_is_recoverable(latest: Path) -> None:
    gen1, gen2 = chain(2, 2)
    write_latest(latest, receipt(gen1))
    # Simulate a crash after the prior generation was preserved but before the latest moved.
    atomic_write_json(history_path(latest, "gen-1"), receipt(gen1))
    (history_dir(latest) / ".receipt-abandoned.tmp").write_text("{partial")
    assert current_tip(latest) == "gen-1"
    write_latest(latest, receipt(gen2))
    assert current_tip(latest) == "gen-2"


def test_concurrent_writers_lose_no_generation(latest: Path) -> None:
    gen1 = root("gen-1", 2)
    write_latest(latest, receipt(gen1))
    siblings = [receipt(successor(gen1, f"sibling-{n}")) for n in range(8)]
    threads = [threading.Thread(target=write_latest, args=(latest, body)) for body in siblings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sources = sorted(g["findings"]["sourceReceiptId"] for g in lineage_at(latest))  # type: ignore[index]
    assert sources == sorted(["gen-1", *(f"sibling-{n}" for n in range(8))])
    assert not list(history_dir(latest).glob("*.tmp"))
    selection = select_current(
        lineage_at(latest), head_sha=HEAD, review_kind="implementation", backend="codex"
    )
    assert selection.status == "ambiguous"  # eight head tips: never a silent pick
