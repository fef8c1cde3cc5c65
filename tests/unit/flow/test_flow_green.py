"""Green receipts against real git repositories: honour, refuse, and always skip loudly."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

import pytest
from forkhorse.flow import green

from tests.unit.flow.flow_factories import RunCli, git

COMMAND = "echo ran >> .flow/tmp/runs.log"


def runs(repo: Path) -> int:
    log = repo / ".flow" / "tmp" / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def receipt_file(repo: Path, gate: str = "unit") -> Path:
    return repo / green.receipt_path(git(repo, "rev-parse", "HEAD"), gate)


def prepare(repo: Path) -> None:
    (repo / ".flow" / "tmp").mkdir(parents=True, exist_ok=True)


def test_run_writes_a_receipt_then_skips_loudly(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    assert runs(repo) == 1
    head = git(repo, "rev-parse", "HEAD")
    stored = json.loads(receipt_file(repo).read_text())
    assert set(stored) == {"schema", "head_sha", "gate_id", "command_sha256", "timestamp"}
    assert stored["schema"] == 1
    assert stored["head_sha"] == head
    assert stored["gate_id"] == "unit"
    assert stored["command_sha256"] == green.command_sha256(COMMAND)
    assert receipt_file(repo).name == f"{head[:8]}-unit.json"
    capsys.readouterr()

    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    assert runs(repo) == 1  # not re-run
    assert f"GATE_SKIPPED:unit:green-receipt {head[:8]}" in capsys.readouterr().out
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 0
    assert f"GATE_SKIPPED:unit:green-receipt {head[:8]}" in capsys.readouterr().out


def test_check_without_a_receipt_says_no(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 1
    out = capsys.readouterr().out
    assert "GATE_SKIPPED" not in out
    assert "no green receipt" in out


def test_writing_is_refused_on_a_dirty_tree(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    prepare(repo)
    (repo / "app.py").write_text("print('changed')\n")
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    assert runs(repo) == 1
    assert not receipt_file(repo).exists()
    assert "not written: dirty tree (app.py)" in capsys.readouterr().err


def test_untracked_files_make_the_tree_dirty(repo: Path, run_cli: RunCli) -> None:
    prepare(repo)
    (repo / "new.py").write_text("x = 1\n")
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    assert not receipt_file(repo).exists()


def test_a_command_that_dirties_the_tree_gets_no_receipt(repo: Path, run_cli: RunCli) -> None:
    assert run_cli("gate", "run", "--id", "unit", "--", "echo x > generated.txt") == 0
    assert not receipt_file(repo).exists()


def test_a_valid_receipt_is_not_honoured_on_a_dirty_tree(repo: Path, run_cli: RunCli) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    (repo / "app.py").write_text("print('changed')\n")
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 1
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    assert runs(repo) == 2


def test_wrong_hash_runs_the_gate_again(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    capsys.readouterr()
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND + " ") == 1
    assert "command fingerprint mismatch" in capsys.readouterr().out


def test_receipt_at_the_wrong_path_is_not_honoured(repo: Path, run_cli: RunCli) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    original = receipt_file(repo)
    moved = original.with_name("00000000-unit.json")
    original.rename(moved)
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 1
    original.symlink_to(moved.name)  # a symlink at the right path is not the receipt either
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 1


def test_receipt_for_another_gate_id_is_not_honoured(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    receipt_file(repo).rename(receipt_file(repo, "smoke"))
    capsys.readouterr()
    assert run_cli("gate", "check", "--id", "smoke", "--", COMMAND) == 1
    assert "gate id mismatch" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("age", "honoured"),
    [(timedelta(hours=23), True), (timedelta(hours=25), False), (timedelta(hours=-1), False)],
)
def test_24_hour_age(repo: Path, run_cli: RunCli, age: timedelta, honoured: bool) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    path = receipt_file(repo)
    stored = json.loads(path.read_text())
    stored["timestamp"] = (datetime.now(UTC) - age).isoformat()
    path.write_text(json.dumps(stored))
    assert (run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 0) is honoured


def test_a_new_commit_invalidates_the_receipt(repo: Path, run_cli: RunCli) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    (repo / "app.py").write_text("print('next')\n")
    git(repo, "commit", "-qam", "next")
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 1
    assert run_cli("gate", "run", "--id", "unit", "--", COMMAND) == 0
    assert runs(repo) == 2


def test_failing_command_exits_1_and_writes_nothing(repo: Path, run_cli: RunCli) -> None:
    assert run_cli("gate", "run", "--id", "unit", "--", "exit 3") == 1
    assert not receipt_file(repo).exists()


def test_argv_commands_are_fingerprinted_as_a_shell_joined_string(
    repo: Path, run_cli: RunCli
) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--id", "unit", "--", "sh", "-c", COMMAND) == 0
    stored = json.loads(receipt_file(repo).read_text())
    assert stored["command_sha256"] == green.command_sha256(f"sh -c '{COMMAND}'")


def test_json_output(repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]) -> None:
    prepare(repo)
    assert run_cli("gate", "run", "--json", "--id", "unit", "--", COMMAND) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (first["ran"], first["passed"], first["written"]) == (True, True, True)
    assert run_cli("gate", "check", "--json", "--id", "unit", "--", COMMAND) == 0
    captured = capsys.readouterr()
    second = json.loads(captured.out)
    assert (second["honoured"], second["skipped"]) == (True, True)
    assert "GATE_SKIPPED:unit:green-receipt" in captured.err


@pytest.mark.parametrize("gate", ["-lead", "..", "has space", "a/b", "x" * 65])
def test_invalid_gate_id_is_a_usage_error(repo: Path, run_cli: RunCli, gate: str) -> None:
    assert run_cli("gate", "check", f"--id={gate}", "--", COMMAND) == 2


def test_outside_a_git_repository_is_an_error(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert run_cli("gate", "check", "--id", "unit", "--", COMMAND) == 2


def test_receipt_only_state_does_not_dirty_the_tree(repo: Path) -> None:
    for relative in (".flow/tasks/t.md", ".flow/tmp/x", ".flow/review-receipts/r.json"):
        target = repo / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x")
    status = os.popen("git status --porcelain=v1 -z --untracked-files=all").read().encode()
    assert green.dirty_paths(status) == []
    (repo / ".flow" / "config.json").write_text("{}")
    status = os.popen("git status --porcelain=v1 -z --untracked-files=all").read().encode()
    assert green.dirty_paths(status) == [".flow/config.json"]


def test_dirty_paths_reads_renames() -> None:
    status = b"R  new.py\0old.py\0 M .flow/tasks/a.md\0?? x y.txt\0"
    assert green.dirty_paths(status) == ["new.py", "old.py", "x y.txt"]


def test_pure_check_reasons() -> None:
    now = datetime.now(UTC)
    head = "0" * 40
    good = green.new_receipt(head_sha=head, gate_id="unit", command="c", now=now)
    assert green.check_receipt(good, head_sha=head, gate_id="unit", command="c", now=now).honoured
    bad_path = PurePosixPath(".flow/tmp/green-receipts/11111111-unit.json")
    check = green.check_receipt(
        good, head_sha=head, gate_id="unit", command="c", now=now, path=bad_path
    )
    assert check.reason == "path mismatch"
    exactly_24h = green.check_receipt(
        good, head_sha=head, gate_id="unit", command="c", now=now + timedelta(hours=24)
    )
    assert exactly_24h.honoured
    for broken in (
        [],
        {**good, "command_sha256": 5},
        {**good, "timestamp": "yesterday"},
        {**good, "timestamp": 0},
    ):
        assert not green.check_receipt(
            broken, head_sha=head, gate_id="unit", command="c", now=now
        ).honoured


@pytest.mark.parametrize(
    "timestamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-11-30", 7]
)
def test_an_unusable_timestamp_fails_closed(timestamp: object) -> None:
    now = datetime(2026, 11, 30, 8, tzinfo=UTC)
    head = "0123456789abcdef0123456789abcdef01234567"
    receipt = green.new_receipt(head_sha=head, gate_id="unit", command="make", now=now)
    receipt["timestamp"] = timestamp
    check = green.check_receipt(receipt, head_sha=head, gate_id="unit", command="make", now=now)
    assert (check.honoured, check.reason) == (False, "bad receipt timestamp")
