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
    saved = config.save_profile("default", config.ClientConfig("https://a", "from-profile", "p1"))
    assert saved.stat().st_mode & 0o777 == 0o600
    assert config.resolve() == config.ClientConfig("https://a", "from-profile", "p1")
    monkeypatch.setenv("FORKHORSE_TOKEN", "from-environment")
    monkeypatch.setenv("FORKHORSE_URL", "https://b/")
    assert config.resolve() == config.ClientConfig("https://b", "from-environment", "p1")
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    found = config.resolve("https://c", token_file, project="p2")
    assert found == config.ClientConfig("https://c", "from-file", "p2")
    assert "from-file" not in repr(found)


def test_profiles_are_kept_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    config.save_profile("owner", config.ClientConfig("https://o", "owner-token"))
    config.save_profile("agent", config.ClientConfig("https://a", 'a"gent\\token'))
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
        config.resolve("https://a", token_file)
    with pytest.raises(UsageError, match="Cannot read the token file"):
        config.resolve("https://a", tmp_path / "missing")


def test_nothing_configured_says_what_to_do() -> None:
    with pytest.raises(UsageError, match="No service URL: pass --url"):
        config.resolve()


def test_the_credential_helper_answers_only_its_own_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORKHORSE_TOKEN", "secret")
    monkeypatch.setenv("FORKHORSE_URL", "http://127.0.0.1:8787")
    asked = "protocol=http\nhost=127.0.0.1:8787\n"
    assert gitpush.answer_credential("get", asked) == "username=forkhorse\npassword=secret\n"
    assert gitpush.answer_credential("get", "protocol=http\nhost=evil.example\n") == ""
    assert gitpush.answer_credential("get", "protocol=https\nhost=127.0.0.1:8787\n") == ""
    assert gitpush.answer_credential("store", asked) == ""
    assert "secret" not in gitpush.helper_command()


ANSWERED = "username=forkhorse\npassword=secret\n"


@pytest.mark.parametrize(
    ("service", "asked", "answered"),
    [
        # the exact origin, default ports made explicit either way
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example\n", True),
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example:443\n", True),
        ("https://forkhorse.example:443/", "protocol=https\nhost=forkhorse.example\n", True),
        ("https://Forkhorse.Example", "protocol=https\nhost=forkhorse.example\n", True),
        ("http://[::1]:8787", "protocol=http\nhost=[::1]:8787\n", True),
        ("http://localhost:8787", "protocol=http\nhost=localhost:8787\n", True),
        ("https://forkhorse.example", "url=https://forkhorse.example/git/p.git\n", True),
        # git's other fields do not matter
        (
            "https://forkhorse.example",
            "capability[]=authtype\nprotocol=https\nhost=forkhorse.example\n"
            "path=git/p.git\nwwwauth[]=Basic realm=a\nwwwauth[]=Bearer\n",
            True,
        ),
        # another host, port or scheme
        ("https://forkhorse.example", "protocol=https\nhost=evil.example\n", False),
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example:8443\n", False),
        ("https://forkhorse.example", "protocol=http\nhost=forkhorse.example\n", False),
        ("https://forkhorse.example", "protocol=http\nhost=forkhorse.example:443\n", False),
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example.evil\n", False),
        ("https://forkhorse.example", "protocol=https\nhost=evil@forkhorse.example\n", False),
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example/x\n", False),
        ("http://127.0.0.1:8787", "protocol=http\nhost=127.0.0.1:8788\n", False),
        ("http://127.0.0.1:8787", "protocol=http\nhost=localhost:8787\n", False),
        # nothing, half, or two answers to "where"
        ("https://forkhorse.example", "", False),
        ("https://forkhorse.example", "host=forkhorse.example\n", False),
        ("https://forkhorse.example", "protocol=https\n", False),
        (
            "https://forkhorse.example",
            "protocol=https\nhost=forkhorse.example\nhost=evil.example\n",
            False,
        ),
        (
            "https://forkhorse.example",
            "protocol=https\nhost=forkhorse.example\nurl=https://evil.example/\n",
            False,
        ),
        # plain http to a host that is not loopback: never, even when configured so
        ("http://forkhorse.example", "protocol=http\nhost=forkhorse.example\n", False),
        ("http://10.0.0.1:8787", "protocol=http\nhost=10.0.0.1:8787\n", False),
    ],
)
def test_the_helper_answers_only_the_configured_origin(
    monkeypatch: pytest.MonkeyPatch, service: str, asked: str, answered: bool
) -> None:
    monkeypatch.setenv("FORKHORSE_TOKEN", "secret")
    monkeypatch.setenv("FORKHORSE_URL", service)
    assert gitpush.answer_credential("get", asked) == (ANSWERED if answered else "")


@pytest.mark.parametrize(
    "url",
    [
        "http://forkhorse.example",
        "http://10.0.0.1:8787",
        "http://127.0.0.1.evil.example",
        "ftp://forkhorse.example",
        "https://user:pass@forkhorse.example",
        "forkhorse.example",
        "https://",
        "https://forkhorse.example:99999",
    ],
)
def test_a_service_url_that_could_leak_the_token_is_refused(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    with pytest.raises(UsageError) as refused:
        config.ClientConfig(url, "secret")
    assert "secret" not in str(refused.value)
    assert "pass" not in str(refused.value)
    monkeypatch.setenv("FORKHORSE_TOKEN", "secret")
    monkeypatch.setenv("FORKHORSE_URL", url)
    with pytest.raises(UsageError):
        config.resolve()


def test_plain_http_is_refused_with_a_clear_sentence() -> None:
    with pytest.raises(UsageError, match=r"plain http sends the token in clear.*use https"):
        config.ClientConfig("http://forkhorse.example", "secret")
    for loopback in (
        "http://127.0.0.1:8787",
        "http://127.9.9.9",
        "http://[::1]",
        "http://localhost",
    ):
        assert config.ClientConfig(loopback, "secret").url == loopback


def test_login_refuses_plain_http_to_another_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("secret\n")
    parser = cli.build_parser()
    argv = ["login", "--url", "http://forkhorse.example", "--token-file", str(token_file)]
    args = parser.parse_args(argv)
    assert args.func(args) == 3
    assert "use https" in capsys.readouterr().err
    assert not config.config_path().exists()


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
