"""Helpers of the API tests: an HTTP client, a git worktree that pushes over smart HTTP,
check files, and polling for receipts (imported explicitly; fixtures live in conftest)."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

RECEIPT_TIMEOUT = 90.0
POLL_SECONDS = 0.1

QUICK_OK = "def check(ctx):\n    return {'ok': True, 'message': 'Quick check passed.'}\n"


def checks_files(*checks: str, quick: bool = True) -> dict[str, str]:
    """A `.forkhorse/checks` with a real quick check (bubblewrap) and busybox full checks
    running each shell command in `checks`."""
    entries = []
    files: dict[str, str] = {}
    if quick:
        entries.append('{"name":"quick","tier":"quick","module":".forkhorse/quick/ok.py"}')
        files[".forkhorse/quick/ok.py"] = QUICK_OK
    for index, command in enumerate(checks):
        entries.append(
            f'{{"name":"full-{index}","tier":"full","image":"busybox","run":"{command}"}}'
        )
    files[".forkhorse/checks"] = "[" + ",".join(entries) + "]\n"
    return files


PASSING = checks_files("true")
FAILING = checks_files("exit 1")


class ShiftClock:
    """The system clock plus an offset, shared by the service and the runner."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


@dataclass
class Client:
    base: str
    token: str | None = None
    # One kept-alive session, for a client that calls from one thread; else a fresh
    # connection per call.
    session: requests.Session | None = field(default=None, compare=False, repr=False)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        token: str | None = None,
    ) -> tuple[int, Any]:
        sent = {"Content-Type": "application/json"} if method != "GET" else {}
        bearer = token or self.token
        if bearer:
            sent["Authorization"] = f"Bearer {bearer}"
        sent.update(headers or {})
        sender = self.session or requests
        response = sender.request(method, self.base + path, json=body, headers=sent, timeout=120)
        try:
            payload = response.json()
        except ValueError:
            payload = response.text
        return response.status_code, payload

    def ok(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        status, payload = self.call(method, path, body)
        assert status == expect, (method, path, status, payload)
        return payload

    def state(self, project: str) -> dict[str, Any]:
        return self.ok("GET", f"/projects/{project}/state")  # type: ignore[no-any-return]

    def review(self, project: str, review_id: str) -> dict[str, Any]:
        """One review, active or not (`/state` shows only the active ones)."""
        return self.ok("GET", f"/projects/{project}/reviews/{review_id}")["review"]  # type: ignore[no-any-return]

    def wait_receipt(self, project: str, review_id: str) -> dict[str, Any]:
        """Poll the review until its receipt leaves `running`."""
        deadline = time.monotonic() + RECEIPT_TIMEOUT
        while time.monotonic() < deadline:
            review = self.review(project, review_id)
            receipt = review["receipt"]
            if receipt is None or receipt["status"] != "running":
                return review
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"receipt of {review_id} still running")

    def promote(self, project: str, review_id: str, commit: str) -> tuple[int, Any]:
        """Promote, following a 202 through GET .../promotion until it settles."""
        path = f"/projects/{project}/reviews/{review_id}"
        status, body = self.call("POST", f"{path}/promote", {"commit": commit})
        deadline = time.monotonic() + RECEIPT_TIMEOUT
        while status == 202 and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            status, body = self.call("GET", f"{path}/promotion")
        return status, body


def git_env(home: Path, token: str | None) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Agent",
        "GIT_AUTHOR_EMAIL": "agent@forkhorse.invalid",
        "GIT_COMMITTER_NAME": "Agent",
        "GIT_COMMITTER_EMAIL": "agent@forkhorse.invalid",
    }
    if token:
        basic = base64.b64encode(f"x:{token}".encode()).decode()
        env.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="http.extraHeader",
            GIT_CONFIG_VALUE_0=f"Authorization: Basic {basic}",
        )
    return env


class Worktree:
    """A local repository that commits files and pushes them with the real git CLI."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git(None, "init", "-q", "-b", "main")

    def git(self, token: str | None, *args: str) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=self.path,
            env=git_env(self.path, token),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise AssertionError(f"git {args[0]} failed: {done.stderr}")
        return done.stdout.strip()

    def commit(self, files: dict[str, str], message: str = "change") -> str:
        for name, content in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        self.git(None, "add", "-A")
        self.git(None, "commit", "-q", "--allow-empty", "-m", message)
        return self.git(None, "rev-parse", "HEAD")

    def push(self, url: str, token: str, force: bool = False) -> None:
        args = ["push", "-q", url, "HEAD:refs/heads/main"]
        self.git(token, *([*args, "--force"] if force else args))
