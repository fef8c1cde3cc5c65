"""CLI exit codes and output: 0 yes/valid, 1 no/invalid, 2 usage or I/O error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from forkhorse.flow.history import write_latest
from forkhorse.flow.ids import finding_id

from tests.unit.flow.flow_factories import HEAD, OTHER_HEAD, RunCli, chain, receipt, root, successor


def write(path: Path, value: Any) -> Path:
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


def test_validate_valid_and_invalid(
    tmp_path: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path / "good.json", receipt(root("r", 2)))
    broken = receipt(root("r", 4))
    broken["findings"]["items"][3]["title"] = ""
    bad = write(tmp_path / "bad.json", broken)
    assert run_cli("receipt", "validate", str(good)) == 0
    assert run_cli("receipt", "validate", str(good), str(bad)) == 1
    out = capsys.readouterr().out
    assert f"{good}: valid" in out
    assert f"{bad}: invalid: item.title at /findings/items/3/title" in out


def test_validate_json_output(
    tmp_path: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path / "bad.json", {"type": "impl_review", "mode": "codex", "verdict": "Ship"})
    assert run_cli("receipt", "validate", "--json", str(bad)) == 1
    [result] = json.loads(capsys.readouterr().out)
    assert (result["valid"], result["rule"], result["pointer"]) == (
        False,
        "receipt.verdict",
        "/verdict",
    )


def test_validate_malformed_json_is_invalid_and_missing_file_is_an_error(
    tmp_path: Path, run_cli: RunCli
) -> None:
    assert run_cli("receipt", "validate", str(write(tmp_path / "x.json", "{nope"))) == 1
    assert run_cli("receipt", "validate", str(tmp_path / "missing.json")) == 2


@pytest.mark.parametrize(
    ("text", "rule_message"),
    [
        ('{"type": "impl_review", "mode": "codex", "verdict": "SHIP", "x": NaN}', "non-finite"),
        (
            '{"type": "impl_review", "mode": "codex", "verdict": "SHIP", "x": -Infinity}',
            "non-finite",
        ),
        (
            '{"type": "impl_review", "mode": "codex", "verdict": "SHIP", "x": "\\ud800"}',
            "surrogate",
        ),
        ('{"type": "impl_review", "x": ' + "[" * 65 + "]" * 65 + "}", "deeper than the limit"),
    ],
)
def test_validate_refuses_what_json_does_not_allow(
    tmp_path: Path,
    run_cli: RunCli,
    capsys: pytest.CaptureFixture[str],
    text: str,
    rule_message: str,
) -> None:
    path = write(tmp_path / "odd.json", text)
    assert run_cli("receipt", "validate", "--json", str(path)) == 1
    [result] = json.loads(capsys.readouterr().out)
    assert (result["valid"], result["rule"]) == (False, "receipt.json")
    assert rule_message in result["message"]


def test_findings_id(run_cli: RunCli, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("findings", "id", "receipt-round-1", "1") == 0
    assert capsys.readouterr().out.strip() == "finding-91d355d7abc9978f629e54fc28921f3e"
    assert run_cli("findings", "id", "--json", "r", "7") == 0
    assert json.loads(capsys.readouterr().out) == {"id": finding_id("r", 7)}


@pytest.mark.parametrize("ordinal", ["0", "-1", "1.0", "x", "True"])
def test_findings_id_rejects_bad_ordinals_with_exit_2(run_cli: RunCli, ordinal: str) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli("findings", "id", "r", ordinal)
    assert exited.value.code == 2


def current(run_cli: RunCli, *files: Path, head: str = HEAD, extra: tuple[str, ...] = ()) -> int:
    return run_cli(
        "findings",
        "current",
        *extra,
        "--head",
        head,
        "--kind",
        "implementation",
        "--backend",
        "codex",
        *(str(f) for f in files),
    )


def test_findings_current_prints_the_tip_and_statuses(
    tmp_path: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    gen1, gen2 = chain(2, 2)
    files = [write(tmp_path / "1.json", receipt(gen1)), write(tmp_path / "2.json", receipt(gen2))]
    assert current(run_cli, *files) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "current gen-2"
    assert lines[1:] == [f"{i['id']} not_fixed P2 introduced" for i in gen2["items"]]
    assert current(run_cli, *files, extra=("--json",)) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["status"], payload["sourceReceiptId"], payload["chain"]) == (
        "current",
        "gen-2",
        ["gen-2", "gen-1"],
    )


def test_findings_current_reads_a_receipt_path_with_its_history(
    tmp_path: Path, run_cli: RunCli
) -> None:
    latest = tmp_path / "feature.json"
    gen1, gen2 = chain(2, 2)
    write_latest(latest, receipt(gen1))
    write_latest(latest, receipt(gen2))
    assert current(run_cli, latest) == 0
    assert current(run_cli, latest, latest) == 0  # naming a file twice is not a duplicate
    latest.unlink()
    assert current(run_cli, latest) == 0  # recovered from the history's unique tip


@pytest.mark.parametrize(
    ("build", "status"),
    [
        (
            lambda: [
                receipt(successor(root("g1", 1), "g2", head=OTHER_HEAD)),
                receipt(root("g1", 1)),
            ],
            "stale",
        ),
        (lambda: [receipt(root("a", 1)), receipt(root("b", 1))], "ambiguous"),
        (lambda: [receipt(root("a", 1), mode="copilot")], "unsupported"),
        (lambda: [receipt(None)], "absent"),
    ],
)
def test_findings_current_exits_1_with_the_reason(
    tmp_path: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str], build: Any, status: str
) -> None:
    files = [write(tmp_path / f"{n}.json", body) for n, body in enumerate(build())]
    assert current(run_cli, *files) == 1
    assert capsys.readouterr().out.startswith(f"{status}: ")


def test_findings_current_unreadable_json_is_unsupported(tmp_path: Path, run_cli: RunCli) -> None:
    assert current(run_cli, write(tmp_path / "x.json", "{")) == 1
    assert current(run_cli, tmp_path / "missing.json") == 2


def test_findings_current_rejects_unknown_kinds(tmp_path: Path, run_cli: RunCli) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli("findings", "current", "--head", HEAD, "--kind", "impl", "--backend", "codex", "x")
    assert exited.value.code == 2


def test_real_process_exit_codes(tmp_path: Path) -> None:
    script = (
        "import argparse, sys; from forkhorse.flow import cli\n"
        "p = argparse.ArgumentParser(prog='forkhorse')\n"
        "s = p.add_subparsers(dest='command', required=True)\n"
        "cli.register(s); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))\n"
    )
    good = write(tmp_path / "good.json", receipt(root("r", 1)))

    def run(*argv: str) -> int:
        return subprocess.run(
            [sys.executable, "-c", script, *argv], capture_output=True, check=False
        ).returncode

    assert run("receipt", "validate", str(good)) == 0
    assert run("receipt", "validate", str(write(tmp_path / "bad.json", {"type": "x"}))) == 1
    assert run("receipt", "validate") == 2
    assert run("findings", "frobnicate") == 2
