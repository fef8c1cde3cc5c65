"""`forkhorse gate receipt` (a command run elsewhere), pruning, and the symlink refusal."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow import green
from forkhorse.flow.gate_receipts import prune_stale

from tests.unit.flow.flow_factories import RunCli, git

COMMAND = "make test"


def receipts_dir(repo: Path) -> Path:
    return repo / ".flow" / "tmp" / "green-receipts"


def test_receipt_records_a_command_and_check_then_honours_it(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("gate", "receipt", "--json", "--id", "unit", "--", COMMAND) == 0
    payload = json.loads(capsys.readouterr().out)
    head = git(repo, "rev-parse", "HEAD")
    assert payload["path"] == f".flow/tmp/green-receipts/{head[:8]}-unit.json"
    assert (payload["head_sha"], payload["sha8"]) == (head, head[:8])
    assert payload["command_sha256"] == green.command_sha256(COMMAND)
    stored = json.loads((repo / payload["path"]).read_text())
    assert stored == {
        "schema": 1,
        "head_sha": head,
        "gate_id": "unit",
        "command_sha256": green.command_sha256(COMMAND),
        "timestamp": payload["timestamp"],
    }
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 0
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND + " --all") == 1


def test_receipt_on_a_dirty_tree_writes_nothing_and_exits_1(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "app.py").write_text("print('changed')\n")
    assert run_cli("gate", "receipt", "--json", "--id", "unit", "--", COMMAND) == 1
    assert json.loads(capsys.readouterr().out)["written"] is False
    assert not receipts_dir(repo).exists()


def test_receipt_state_under_flow_tmp_does_not_make_the_tree_dirty(
    repo: Path, run_cli: RunCli
) -> None:
    assert run_cli("gate", "receipt", "--id", "unit", "--", COMMAND) == 0
    assert run_cli("gate", "receipt", "--id", "smoke", "--", COMMAND) == 0
    assert len(list(receipts_dir(repo).iterdir())) == 2


@pytest.mark.parametrize("gate_id", ["", ".", "..", "-x", "a/b", "x" * 65])
def test_receipt_refuses_a_bad_gate_id(repo: Path, run_cli: RunCli, gate_id: str) -> None:
    assert run_cli("gate", "receipt", f"--id={gate_id}", "--", COMMAND) == 2
    assert not receipts_dir(repo).exists()


@pytest.mark.parametrize("link", [".flow", ".flow/tmp", ".flow/tmp/green-receipts"])
def test_a_receipts_dir_symlinked_outside_the_repository_is_refused(
    repo: Path, tmp_path: Path, run_cli: RunCli, link: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / link).parent.mkdir(parents=True, exist_ok=True)
    (repo / link).symlink_to(outside, target_is_directory=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "symlinked receipts")
    assert run_cli("gate", "receipt", "--id", "unit", "--", COMMAND) == 2
    assert run_cli("gate", "run", "--id", "unit", "--", "true") == 2
    assert list(outside.rglob("*.json")) == []
    # A receipt planted outside is never honoured through the link.
    head = git(repo, "rev-parse", "HEAD")
    planted = green.new_receipt(
        head_sha=head, gate_id="unit", command=COMMAND, now=datetime.now(UTC)
    )
    target = repo / green.receipt_path(head, "unit")
    target.parent.resolve().mkdir(parents=True, exist_ok=True)
    target.resolve().write_text(json.dumps(planted))
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 1


def write_receipt(folder: Path, name: str, age: timedelta, now: datetime) -> Path:
    path = folder / name
    receipt = green.new_receipt(head_sha="a" * 40, gate_id="unit", command=COMMAND, now=now - age)
    path.write_text(json.dumps(receipt))
    return path


def test_prune_removes_only_receipts_past_the_age_bound(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    stale = write_receipt(tmp_path, "aaaaaaaa-old.json", timedelta(hours=25), now)
    fresh = write_receipt(tmp_path, "aaaaaaaa-new.json", timedelta(hours=23), now)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{nope")
    note = tmp_path / "notes.txt"
    note.write_text(json.dumps({"timestamp": "2000-01-01T00:00:00Z"}))
    link = tmp_path / "link.json"
    link.symlink_to(stale)
    huge = tmp_path / "huge.json"
    huge.write_text(
        json.dumps(
            {"timestamp": "2000-01-01T00:00:00Z", "pad": "x" * FLOW_PRODUCER.green_receipt_bytes}
        )
    )
    assert prune_stale(tmp_path, now=now) == ("aaaaaaaa-old.json",)
    assert not stale.exists()
    assert all(p.exists() or p.is_symlink() for p in (fresh, garbage, note, link, huge))


def test_prune_looks_at_no_more_than_the_entry_bound(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    total = FLOW_PRODUCER.green_dir_entries + 50
    for index in range(total):
        write_receipt(tmp_path, f"{index:08x}-unit.json", timedelta(days=2), now)
    removed = prune_stale(tmp_path, now=now)
    assert len(removed) == FLOW_PRODUCER.green_dir_entries
    assert len(list(tmp_path.iterdir())) == total - FLOW_PRODUCER.green_dir_entries


def test_gate_receipt_prunes_old_receipts(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = receipts_dir(repo)
    folder.mkdir(parents=True)
    write_receipt(folder, "00000000-unit.json", timedelta(hours=30), datetime.now(UTC))
    assert run_cli("gate", "receipt", "--json", "--id", "unit", "--", COMMAND) == 0
    assert json.loads(capsys.readouterr().out)["pruned"] == ["00000000-unit.json"]
    assert [p.name for p in folder.iterdir()] == [f"{git(repo, 'rev-parse', 'HEAD')[:8]}-unit.json"]
