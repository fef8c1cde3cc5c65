"""`forkhorse criteria list` and the configured ids a completion receipt binds to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow.standing import configured_ids

from tests.unit.flow.flow_factories import RunCli


def write_criteria(repo: Path, text: str) -> Path:
    path = repo / ".flow" / "criteria.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def listed(run_cli: RunCli, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = run_cli("criteria", "list", "--json")
    captured = capsys.readouterr()
    return code, json.loads(captured.out or captured.err)


def test_absent_file_lists_nothing(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    assert listed(run_cli, capsys) == (0, {"criteria": [], "count": 0, "path": None})
    assert configured_ids(repo) == ()


def test_valid_file_lists_each_criterion(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_criteria(
        repo,
        "# Standing criteria\n\n- **G1:** Routes have contract tests.\n- **G3:** No secrets.\n",
    )
    code, payload = listed(run_cli, capsys)
    assert code == 0
    assert payload == {
        "criteria": [
            {"id": "G1", "text": "Routes have contract tests."},
            {"id": "G3", "text": "No secrets."},
        ],
        "count": 2,
        "path": str(path),
    }
    assert configured_ids(repo) == ("G1", "G3")
    assert run_cli("criteria", "list") == 0
    assert capsys.readouterr().out.splitlines() == [
        "G1: Routes have contract tests.",
        "G3: No secrets.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "- **G1**: misplaced colon\n",
        "- **G1:** one\n- **G1:** again\n",
        "- **G2:**\n",
        "- G4: plain bullet\n",
    ],
)
def test_an_unusable_file_exits_2_and_binds_nothing(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    write_criteria(repo, text)
    code, payload = listed(run_cli, capsys)
    assert code == 2
    assert "invalid .flow/criteria.md" in str(payload["error"])
    assert configured_ids(repo) == ()


def test_the_criteria_count_is_capped_at_100(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    cap = FLOW_PRODUCER.criteria_entries
    lines = [f"- **G{n}:** criterion {n}" for n in range(1, cap + 2)]
    write_criteria(repo, "\n".join(lines[:cap]))
    assert listed(run_cli, capsys)[1]["count"] == cap
    write_criteria(repo, "\n".join(lines))
    code, payload = listed(run_cli, capsys)
    assert code == 2
    assert "too many criteria" in str(payload["error"])


def test_a_broken_symlink_is_an_error_not_an_absence(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".flow").mkdir()
    (repo / ".flow" / "criteria.md").symlink_to(repo / "nowhere.md")
    code, payload = listed(run_cli, capsys)
    assert code == 2
    assert "broken symlink" in str(payload["error"])


def test_a_criteria_file_over_the_read_bound_is_an_error(
    repo: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    line = "- **G1:** criterion\n"
    pad = FLOW_PRODUCER.criteria_file_bytes - len(line)
    write_criteria(repo, line + " " * pad)
    assert listed(run_cli, capsys)[1]["count"] == 1
    write_criteria(repo, line + " " * (pad + 1))
    code, payload = listed(run_cli, capsys)
    assert code == 2
    assert "larger than" in str(payload["error"])
