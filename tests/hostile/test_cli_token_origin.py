"""A hostile Forkhorse (or a proxy in the middle) against the agent's CLI token (issue 28).

The agent's token goes only to the configured service's exact origin (scheme, host, port,
default ports normalized), and plain http only to loopback (`forkhorse.client.origin`).
Here a fake service on 127.0.0.1 names a fork `cloneUrl` on another origin (another
loopback port, where a second server asks for credentials and records every Authorization
header it gets), redirects API and git requests there, and the real `forkhorse` CLI, the
real git CLI and the credential helper (set up as the README does) are run against them:
the token must never reach the other origin, and the commands must fail saying why.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.client.support import PACKAGE_ROOT, Cli, Seen, run_async
from tests.support.wsgi import LoopbackWsgi

TOKEN = "fh-agent-token-that-must-stay-home"
PROJECT = "p-hostile"
PACKET = "k-hostile"
GIT_SECONDS = 120
HELPER = f"!{sys.executable} -m forkhorse.cli git-credential"


@dataclass
class Asked:
    method: str
    path: str
    authorization: str | None

    def carries(self, token: str) -> bool:
        """Whether this request carried `token`, as a bearer token or a basic password."""
        if self.authorization is None:
            return False
        if token in self.authorization:
            return True
        scheme, _, value = self.authorization.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            return token in base64.b64decode(value).decode(errors="replace")
        except ValueError:
            return False


@dataclass
class Recorder:
    """A WSGI app that records every request; `routes` answer some, the rest ask for basic
    credentials (401), as a git server does, so git asks its credential helper."""

    routes: dict[tuple[str, str], tuple[str, list[tuple[str, str]], bytes]] = field(
        default_factory=dict
    )
    seen: list[Asked] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ["REQUEST_METHOD"]
        with self.lock:
            self.seen.append(Asked(method, path, environ.get("HTTP_AUTHORIZATION")))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            environ["wsgi.input"].read(length)
        found = self.routes.get((method, path))
        if found is None:
            if environ.get("HTTP_AUTHORIZATION"):
                start_response("403 Forbidden", [("Content-Type", "text/plain")])
                return [b"recorded\n"]
            start_response(
                "401 Unauthorized",
                [("WWW-Authenticate", 'Basic realm="forkhorse"'), ("Content-Type", "text/plain")],
            )
            return [b"credentials, please\n"]
        status, headers, body = found
        start_response(status, headers)
        return [body]

    def json(self, method: str, path: str, body: Any, status: str = "200 OK") -> None:
        self.routes[(method, path)] = (
            status,
            [("Content-Type", "application/json")],
            json.dumps(body).encode(),
        )

    def redirect(self, method: str, path: str, location: str) -> None:
        self.routes[(method, path)] = ("302 Found", [("Location", location)], b"")

    def requests_with(self, token: str) -> list[Asked]:
        with self.lock:
            return [seen for seen in self.seen if seen.carries(token)]

    def paths(self) -> list[str]:
        with self.lock:
            return [seen.path for seen in self.seen]


def _state(clone_url: str) -> dict[str, Any]:
    return {
        "project": {
            "id": PROJECT,
            "name": PROJECT,
            "settings": {"requireReceipt": True},
            "policy": {"protectChecks": False},
            "canonicalHead": None,
            "cloneUrl": clone_url,
        },
        "forks": [
            {"id": "f-1", "name": "work", "owner": "a-1", "head": None, "cloneUrl": clone_url}
        ],
        "packets": [],
        "reviews": [],
        "ledger": [],
    }


CLAIM = {
    "claim": {
        "id": "c-1",
        "packetId": PACKET,
        "agentId": "a-1",
        "expiresAt": "2099-01-01T00:00:00Z",
    }
}


@dataclass
class Pair:
    """The configured (hostile) service and another origin that collects tokens."""

    service: Recorder
    service_url: str
    other: Recorder
    other_url: str
    home: Path

    @property
    def other_port(self) -> str:
        return self.other_url.rsplit(":", 1)[1]

    def cli(self, url: str | None = None) -> Cli:
        return Cli(url or self.service_url, TOKEN, self.home, Seen(), PROJECT)

    def assert_other_got_no_token(self) -> None:
        leaked = self.other.requests_with(TOKEN)
        assert not leaked, f"the token reached the other origin: {leaked}"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    service, other = Recorder(), Recorder()
    # A service that keeps no transparency log: the client's witness asks, and goes on.
    service.json("GET", "/log/key", {"error": "No transparency log."}, "404 Not Found")
    served = [LoopbackWsgi(service).start(), LoopbackWsgi(other).start()]
    home = tmp_path / "home"
    home.mkdir()
    try:
        yield Pair(service, served[0].url, other, served[1].url, home)
    finally:
        for server in served:
            server.stop()


def _checkout(root: Path) -> Path:
    work = root / "work"
    env = _git_env(root)
    for args in (
        ["init", "-q", "-b", "main", str(work)],
        ["-C", str(work), "commit", "-q", "--allow-empty", "-m", "work"],
    ):
        subprocess.run(["git", *args], env=env, check=True, capture_output=True)
    return work


def _git_env(home: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PYTHONPATH": PACKAGE_ROOT,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "agent",
        "GIT_AUTHOR_EMAIL": "agent@example.invalid",
        "GIT_COMMITTER_NAME": "agent",
        "GIT_COMMITTER_EMAIL": "agent@example.invalid",
    } | extra


def _git_with_helper(
    pair: Pair, *args: str, service_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    """git as the README sets it up: the helper, configured by the environment."""
    env = _git_env(
        pair.home,
        FORKHORSE_URL=service_url or pair.service_url,
        FORKHORSE_TOKEN=TOKEN,
    )
    return subprocess.run(
        ["git", "-c", f"credential.helper={HELPER}", "-c", "credential.username=forkhorse", *args],
        cwd=pair.home,
        env=env,
        capture_output=True,
        text=True,
        timeout=GIT_SECONDS,
        check=False,
    )


# --- submit ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "clone_url",
    [
        "{other}/git/{project}/forks/f-1.git",  # another port on the same loopback host
        "http://localhost:{port}/git/{project}/forks/f-1.git",  # another host name
        "http://0.0.0.0:{port}/git/{project}/forks/f-1.git",  # not loopback, in clear
    ],
)
def test_submit_refuses_a_clone_url_on_another_origin(
    pair: Pair, tmp_path: Path, clone_url: str
) -> None:
    url = clone_url.format(other=pair.other_url, port=pair.other_port, project=PROJECT)
    pair.service.json("GET", f"/projects/{PROJECT}/state", _state(url))
    pair.service.json("POST", f"/projects/{PROJECT}/packets/{PACKET}/claim", CLAIM)
    checkout = _checkout(tmp_path)
    cli = pair.cli()

    ran = cli.run("submit", "--packet", PACKET, cwd=checkout)

    pair.assert_other_got_no_token()
    assert pair.other.paths() == [], "git must not even try the other origin"
    assert ran.code == 3, ran.stderr
    assert "Refusing to send the token" in ran.stderr
    assert "another origin than the configured service" in ran.stderr
    assert TOKEN not in ran.stderr + ran.stdout
    # Refused before claiming or asking for a review (the witness asked for the log's key).
    assert pair.service.paths() == ["/log/key", f"/projects/{PROJECT}/state"]


def test_the_mcp_submit_refuses_a_clone_url_on_another_origin(pair: Pair, tmp_path: Path) -> None:
    url = f"{pair.other_url}/git/{PROJECT}/forks/f-1.git"
    pair.service.json("GET", f"/projects/{PROJECT}/state", _state(url))
    pair.service.json("POST", f"/projects/{PROJECT}/packets/{PACKET}/claim", CLAIM)
    checkout = _checkout(tmp_path)
    answer: dict[str, Any] = {}

    async def session() -> None:
        parameters = StdioServerParameters(
            command=sys.executable, args=["-m", "forkhorse.cli", "mcp"], env=pair.cli().env()
        )
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                result = await client.call_tool(
                    "submit_review",
                    {"project": PROJECT, "packet": PACKET, "checkout": str(checkout)},
                )
                answer["error"] = result.is_error
                answer["text"] = " ".join(getattr(c, "text", "") for c in result.content)

    run_async(session)
    pair.assert_other_got_no_token()
    assert pair.other.paths() == []
    assert answer["error"], answer
    assert "Refusing to send the token" in answer["text"]


# --- the credential helper with the real git CLI --------------------------------------------
def test_git_gets_no_token_for_another_origin(pair: Pair) -> None:
    # Control: the configured service itself asks, and gets the token through the helper.
    own = _git_with_helper(pair, "ls-remote", f"{pair.service_url}/git/{PROJECT}/canonical.git")
    assert own.returncode != 0  # the fake answers 403 once it has the credentials
    assert pair.service.requests_with(TOKEN), "the helper answers its own service"

    for url in (
        f"{pair.other_url}/git/{PROJECT}/canonical.git",
        f"http://localhost:{pair.other_port}/git/{PROJECT}/canonical.git",
    ):
        asked = _git_with_helper(pair, "ls-remote", url)
        assert asked.returncode != 0
        assert TOKEN not in asked.stderr + asked.stdout
    assert pair.other.paths(), "git did ask the other origin"
    pair.assert_other_got_no_token()


def test_git_follows_no_redirect_to_another_origin_with_the_token(pair: Pair) -> None:
    # The configured service redirects git's first request to the other origin, which asks
    # for credentials there.
    path = f"/git/{PROJECT}/canonical.git/info/refs"
    pair.service.redirect("GET", path, f"{pair.other_url}{path}?service=git-upload-pack")
    asked = _git_with_helper(pair, "ls-remote", f"{pair.service_url}/git/{PROJECT}/canonical.git")
    assert asked.returncode != 0
    pair.assert_other_got_no_token()


def test_a_service_in_clear_on_another_host_gets_no_token_from_git(pair: Pair) -> None:
    # 0.0.0.0 reaches this machine, but it is not a loopback address: plain http to it
    # would carry the token in clear, so the helper answers nothing even when configured so.
    url = f"http://0.0.0.0:{pair.other_port}"
    asked = _git_with_helper(pair, "ls-remote", f"{url}/git/{PROJECT}/c.git", service_url=url)
    assert asked.returncode != 0
    assert pair.other.paths(), "git did ask"
    pair.assert_other_got_no_token()


# --- the credential helper's protocol, directly ---------------------------------------------
@pytest.mark.parametrize(
    ("service", "asked", "answers"),
    [
        ("https://forkhorse.example", "protocol=https\nhost=evil.example\n\n", False),
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example\n\n", True),
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example:443\n\n", True),
        ("https://forkhorse.example", "protocol=https\nhost=forkhorse.example:8443\n\n", False),
        ("https://forkhorse.example", "protocol=http\nhost=forkhorse.example\n\n", False),
        ("http://forkhorse.example", "protocol=http\nhost=forkhorse.example\n\n", False),
        ("http://127.0.0.1:8787", "protocol=http\nhost=127.0.0.1:8787\n\n", True),
        ("http://127.0.0.1:8787", "protocol=http\nhost=127.0.0.1:8788\n\n", False),
        ("http://0.0.0.0:8787", "protocol=http\nhost=0.0.0.0:8787\n\n", False),
    ],
)
def test_the_helper_protocol_answers_only_the_configured_origin(
    tmp_path: Path, service: str, asked: str, answers: bool
) -> None:
    cli = Cli(service, TOKEN, tmp_path, Seen(), PROJECT)
    ran = cli.run("git-credential", "get", stdin=asked)
    assert ran.code == 0, ran.stderr
    assert ran.stdout == (f"username=forkhorse\npassword={TOKEN}\n" if answers else "")


# --- the API client -------------------------------------------------------------------------
def test_an_api_redirect_to_another_origin_is_not_followed(pair: Pair) -> None:
    path = f"/projects/{PROJECT}/state"
    pair.service.redirect("GET", path, f"{pair.other_url}{path}")
    ran = pair.cli().run("status")
    assert pair.other.paths() == []
    pair.assert_other_got_no_token()
    assert ran.code == 2, ran.stderr
    assert "follows no redirect" in ran.stderr
    assert TOKEN not in ran.stderr + ran.stdout


def test_a_service_in_clear_on_another_host_is_refused_before_any_request(pair: Pair) -> None:
    ran = pair.cli(f"http://0.0.0.0:{pair.other_port}").run("status")
    assert pair.other.paths() == []
    assert ran.code == 3, ran.stderr
    assert "plain http sends the token in clear" in ran.stderr
    assert "use https" in ran.stderr
