"""Pushing a checkout's HEAD to the caller's fork with git's own credential handling.

git asks a credential helper for the password; the helper is `forkhorse git-credential`,
which answers with the token from its environment, and only for the service's own host.
So the token is never in a URL, in `.git/config` or in any process's arguments.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from forkhorse.client.config import TOKEN_VARIABLE, URL_VARIABLE, resolve
from forkhorse.client.errors import ClientError, UsageError

GIT_SECONDS = 300
# The user name git sends with the token; the service reads only the password.
GIT_USER = "forkhorse"


def _git(checkout: Path, *args: str, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            check=False,
        )
    except FileNotFoundError:
        raise UsageError("git is not installed.") from None
    except subprocess.TimeoutExpired:
        raise ClientError(f"git {args[0]} took longer than {GIT_SECONDS} s.") from None
    if done.returncode != 0:
        raise UsageError(f"git {args[0]} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def head_commit(checkout: Path) -> str:
    """The checkout's HEAD commit (a usage error outside a repository or before a commit)."""
    if not checkout.is_dir():
        raise UsageError(f"{checkout} is not a directory.")
    return _git(checkout, "rev-parse", "--verify", "HEAD^{commit}")


def helper_command() -> str:
    """The credential helper git runs (a shell command, so `!`); it names no secret."""
    command = shlex.join([sys.executable, "-m", "forkhorse.cli", "git-credential"])
    return f"!{command}"


def push_head(checkout: Path, clone_url: str, token: str, *, force: bool = False) -> None:
    """Push HEAD to the fork's `main`, the token reaching git only through the helper."""
    env = {
        **os.environ,
        TOKEN_VARIABLE: token,
        URL_VARIABLE: clone_url,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
    }
    args = [
        # Forget any configured helper (it might store the token), then use ours.
        "-c",
        "credential.helper=",
        "-c",
        f"credential.helper={helper_command()}",
        "-c",
        f"credential.username={GIT_USER}",
        "push",
        "--quiet",
        clone_url,
        "HEAD:refs/heads/main",
    ]
    if force:
        args.append("--force")
    _git(checkout, *args, env=env)


def answer_credential(operation: str, request: str) -> str:
    """The git credential protocol: for `get` on the configured service's host, its token
    (from the environment or the profile, as for every command); otherwise nothing, and
    git fails closed, since prompting is off."""
    if operation != "get":
        return ""
    fields = dict(line.split("=", 1) for line in request.splitlines() if "=" in line)
    try:
        found = resolve()
    except UsageError:
        return ""
    service = urlsplit(found.url)
    if fields.get("host") != service.netloc or fields.get("protocol") != service.scheme:
        return ""
    return f"username={GIT_USER}\npassword={found.token}\n"
