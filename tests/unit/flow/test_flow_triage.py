"""`forkhorse triage-skip`: reference decisions replayed, then the command on real git."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.triage import bucket, decide

from tests.unit.flow.flow_factories import RunCli, git, load_vectors

VECTORS = load_vectors("generated-producer/triage-vectors.json")["vectors"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_triage_matches_reference(vector: dict[str, Any]) -> None:
    if vector["kind"] == "bucket":
        assert bucket(vector["paths"][0]) == vector["expected"]
    else:
        verdict, reason = decide(vector["paths"])
        assert {"verdict": verdict, "reason": reason} == vector["expected"]


def commit(repo: Path, files: dict[str, str], message: str = "change") -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def branch(repo: Path) -> Path:
    commit(repo, {"package.json": '{\n  "name": "x",\n  "version": "1.0.0",\n  "deps": 1\n}\n'})
    git(repo, "checkout", "-q", "-b", "feature")
    return repo


def triage(run_cli: RunCli, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, Any]:
    code = run_cli("triage-skip", "--json", *extra)
    return code, json.loads(capsys.readouterr().out)


def test_docs_only_skips_and_writes_a_valid_receipt(
    branch: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    commit(branch, {"docs/guide.md": "# Guide\n"})
    receipt = branch / ".flow" / "review-receipts" / "impl.json"
    code, payload = triage(run_cli, capsys, "--task", "fn-1.1", "--receipt", str(receipt))
    assert code == 0
    assert (payload["verdict"], payload["mode"], payload["base"]) == ("SHIP", "triage_skip", "main")
    stored = json.loads(receipt.read_text())
    assert stored["mode"] == "triage_skip"
    assert (stored["id"], stored["verdict"], stored["changed_file_count"]) == ("fn-1.1", "SHIP", 1)
    assert validate_receipt(stored).valid


def test_code_forces_a_review_and_writes_nothing(
    branch: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    commit(branch, {"docs/guide.md": "x\n", "src/app.py": "x = 1\n"})
    receipt = branch / "impl.json"
    code, payload = triage(run_cli, capsys, "--receipt", str(receipt))
    assert code == 1
    assert payload["reason"].startswith("code change detected")
    assert not receipt.exists()


def test_a_version_only_manifest_bump_skips_but_a_dependency_edit_reviews(
    branch: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = (branch / "package.json").read_text()
    commit(branch, {"package.json": manifest.replace("1.0.0", "1.0.1")})
    code, payload = triage(run_cli, capsys)
    assert (code, payload["reason"]) == (0, "release-chore (1 manifest files)")
    commit(branch, {"package.json": manifest.replace('"deps": 1', '"deps": 2')})
    code, payload = triage(run_cli, capsys)
    assert code == 1
    assert payload["reason"] == (
        "manifest edit beyond version field: package.json (no LLM, defaulting to REVIEW)"
    )


def test_an_empty_diff_reviews_and_a_bad_base_is_an_error(
    branch: Path, run_cli: RunCli, capsys: pytest.CaptureFixture[str]
) -> None:
    code, payload = triage(run_cli, capsys)
    assert (code, payload["changed_file_count"]) == (1, 0)
    assert run_cli("triage-skip", "--base", "no-such-branch") == 2
