"""Fixtures for the flow tests: real git repositories and an in-process `forkhorse` parser."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from forkhorse.flow import cli

from tests.unit.flow.flow_factories import RunCli, git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real git repository with one commit, as the current directory."""
    if shutil.which("git") is None:
        pytest.fail("git is required for the green-receipt tests")
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.invalid")
    git(path, "config", "user.name", "Dev")
    git(path, "config", "commit.gpgsign", "false")
    (path / "app.py").write_text("print('hi')\n")
    git(path, "add", "app.py")
    git(path, "commit", "-q", "-m", "first")
    monkeypatch.chdir(path)
    return path


@pytest.fixture
def run_cli() -> RunCli:
    """Parse and dispatch exactly as `forkhorse` will once the module is in COMMAND_MODULES."""

    def run(*argv: str) -> int:
        parser = argparse.ArgumentParser(prog="forkhorse")
        subparsers = parser.add_subparsers(dest="command", required=True)
        cli.register(subparsers)
        args = parser.parse_args(list(argv))
        code: int = args.func(args)
        return code

    return run
