"""Where the client finds its URL and token, and what git's credential helper answers."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from forkhorse import cli
from forkhorse.client import cli as client_cli
from forkhorse.client import config, gitpush
from forkhorse.client.errors import UsageError


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("FORKHORSE_URL", "FORKHORSE_TOKEN", "FORKHORSE_PROFILE", "FORKHORSE_PROJECT"):
        monkeypatch.delenv(name, raising=False)


def test_flags_then_environment_then_the_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    saved = config.save_profile("default", config.ClientConfig("http://a", "from-profile", "p1"))
    assert saved.stat().st_mode & 0o777 == 0o600
    assert config.resolve() == config.ClientConfig("http://a", "from-profile", "p1")
    monkeypatch.setenv("FORKHORSE_TOKEN", "from-environment")
    monkeypatch.setenv("FORKHORSE_URL", "http://b/")
    assert config.resolve() == config.ClientConfig("http://b", "from-environment", "p1")
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    found = config.resolve("http://c", token_file, project="p2")
    assert found == config.ClientConfig("http://c", "from-file", "p2")
    assert "from-file" not in repr(found)


def test_profiles_are_kept_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    config.save_profile("owner", config.ClientConfig("http://o", "owner-token"))
    config.save_profile("agent", config.ClientConfig("http://a", 'a"gent\\token'))
    monkeypatch.setenv("FORKHORSE_PROFILE", "agent")
    assert config.resolve().token == 'a"gent\\token'
    assert config.resolve(profile="owner").token == "owner-token"


@pytest.mark.parametrize(
    ("content", "problem"),
    [("", "does not hold one token"), ("one\ntwo\n", "does not hold one token")],
)
def test_a_token_file_holds_exactly_one_token(tmp_path: Path, content: str, problem: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(content)
    with pytest.raises(UsageError, match=problem):
        config.resolve("http://a", token_file)
    with pytest.raises(UsageError, match="Cannot read the token file"):
        config.resolve("http://a", tmp_path / "missing")


def test_nothing_configured_says_what_to_do() -> None:
    with pytest.raises(UsageError, match="No service URL: pass --url"):
        config.resolve()


def test_the_credential_helper_answers_only_its_own_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORKHORSE_TOKEN", "secret")
    monkeypatch.setenv("FORKHORSE_URL", "http://127.0.0.1:8787/git/p/forks/f.git")
    asked = "protocol=http\nhost=127.0.0.1:8787\n"
    assert gitpush.answer_credential("get", asked) == "username=forkhorse\npassword=secret\n"
    assert gitpush.answer_credential("get", "protocol=http\nhost=evil.example\n") == ""
    assert gitpush.answer_credential("get", "protocol=https\nhost=127.0.0.1:8787\n") == ""
    assert gitpush.answer_credential("store", asked) == ""
    assert "secret" not in gitpush.helper_command()


def test_the_client_commands_are_the_ones_registered() -> None:
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    client_cli.register(subparsers)
    assert set(subparsers.choices) == client_cli.COMMANDS


def test_gate_with_a_review_is_the_review_gate_and_flow_gates_stay() -> None:
    parser = cli.build_parser()
    assert client_cli.route(parser, ["gate", "r-1"]) == ["review-gate", "r-1"]
    for kept in (["gate", "check", "--id", "g", "true"], ["gate", "receipt"], ["gate", "-h"]):
        assert client_cli.route(parser, kept) == kept
