"""The producer commands through the real `forkhorse` entry point, as separate processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.unit.flow.flow_factories import git


def forkhorse(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "forkhorse.cli", *argv],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_every_producer_command_keeps_the_exit_code_contract(repo: Path) -> None:
    receipt = {"type": "impl_review", "id": "fn-1.1", "mode": "codex", "verdict": "NEEDS_WORK"}
    (repo / "input.json").write_text(json.dumps(receipt))
    (repo / "review.md").write_text(
        "Severity: Minor\nConfidence: 50\nClassification: pre-existing\nProblem: Slow loop.\n"
    )
    attach = ["review-findings", "attach", "--json", "--receipt", "out/impl.json"]
    attach += ["--input", "input.json", "--review-file", "review.md", "--head", "HEAD"]
    done = forkhorse(repo, *attach)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings_attached"] is True
    assert forkhorse(repo, *attach[:-2], "--head", "nope").returncode == 2
    assert forkhorse(repo, "review-findings", "attach").returncode == 2  # usage

    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "receipt inputs")
    assert forkhorse(repo, "gate", "receipt", "--id", "unit", "--", "make test").returncode == 0
    assert forkhorse(repo, "gate", "check", "--id", "unit", "--", "make test").returncode == 0
    assert forkhorse(repo, "criteria", "list", "--json").returncode == 0
    assert forkhorse(repo, "triage-skip", "--base", "HEAD").returncode == 1  # empty diff
    (repo / "qa.json").write_text(json.dumps({"qa_outcome": "NA"}))
    assert forkhorse(repo, "qa", "receipt", "--spec", "fn-1", "--input", "qa.json").returncode == 2
