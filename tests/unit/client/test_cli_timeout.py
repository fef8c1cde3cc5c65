"""A `submit` or `wait` whose wait runs out still names the review: with `--json`, one JSON
object with its id and a `wait-timed-out` status; exit 2 (README's exit codes)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from forkhorse.client import cli as client_cli
from forkhorse.client import workflow
from forkhorse.client.exits import EXIT_INFRASTRUCTURE
from forkhorse.client.follow import WaitTimedOut


class _Client:
    class config:  # the shape of ForkhorseClient.config
        project = "p1"
        url = "http://127.0.0.1:8787"

    def console_link(self, project: str, review: str) -> str:
        return f"{self.config.url}/#/p/{project}/r/{review}"


class _Submitted:
    class review:
        id = "r1"

    class fork:
        name = "f1"

    commit = "a" * 40


def _never_settles(*_: Any, **__: Any) -> Any:
    raise WaitTimedOut(5)


@pytest.mark.parametrize("as_json", [True, False])
def test_a_submit_whose_wait_runs_out_names_its_review(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    monkeypatch.setattr(workflow, "submit", lambda *_, **__: _Submitted())
    monkeypatch.setattr(workflow, "wait_receipt", _never_settles)
    args = argparse.Namespace(
        json=as_json, packet="k1", fork=None, follow_pushes=False, force=False,
        checkout=Path(), timeout=5.0,
    )  # fmt: skip
    code = client_cli._submit(args, _Client())  # type: ignore[arg-type]
    assert code == EXIT_INFRASTRUCTURE
    out, err = capsys.readouterr()
    if as_json:
        printed = json.loads(out)
        assert printed["review"] == "r1"
        assert printed["status"] == "wait-timed-out"
        assert printed["exitCode"] == EXIT_INFRASTRUCTURE
        assert printed["console"].endswith("/#/p/p1/r/r1")
    else:
        assert "forkhorse wait r1" in err
        assert "still running after 5 s" in err
