"""Pushing a checkout's HEAD to the caller's fork with git's own credential handling.

git asks a credential helper for the password; the helper is `forkhorse git-credential`,
which answers with the token only for the configured service's exact origin (scheme, host,
port: `forkhorse.client.origin`). So the token is never in a URL, in `.git/config` or in any
process's arguments, and a URL the service names (a fork's `cloneUrl`) on another origin, or
a redirect there, gets nothing: the push refuses such a URL before git runs, the helper is
told the configured service (never the URL pushed to), and git follows no redirect.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from forkhorse.client.config import TOKEN_VARIABLE, URL_VARIABLE, ClientConfig, resolve
from forkhorse.client.errors import ClientError, UsageError
from forkhorse.client.origin import credential_origin, require_service_origin, service_origin

GIT_SECONDS = 300
# The user name git sends with the token; the service reads only the password.
GIT_USER = "forkhorse"
# The credential request's fields that say where the password would go.
ORIGIN_FIELDS = frozenset({"protocol", "host", "url"})


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


def push_head(
    checkout: Path, clone_url: str, service: ClientConfig, *, force: bool = False
) -> None:
    """Push HEAD to the fork's `main`, the token reaching git only through the helper, and
    only when `clone_url` is on the configured service's origin."""
    require_service_origin(clone_url, service.url, "the fork's cloneUrl")
    env = {
        **os.environ,
        # The helper's service is the configured one, never the URL pushed to.
        URL_VARIABLE: service.url,
        TOKEN_VARIABLE: service.token,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
    }
    if service_origin(service.url).scheme == "http":  # loopback: no proxy sees it in clear
        env |= {"NO_PROXY": "*", "no_proxy": "*"}
    args = [
        # Forget any configured helper (it might store the token), then use ours.
        "-c",
        "credential.helper=",
        "-c",
        f"credential.helper={helper_command()}",
        "-c",
        f"credential.username={GIT_USER}",
        # A redirect is not followed, not even to the same origin.
        "-c",
        "http.followRedirects=false",
        "push",
        "--quiet",
        clone_url,
        "HEAD:refs/heads/main",
    ]
    if force:
        args.append("--force")
    _git(checkout, *args, env=env)


def answer_credential(operation: str, request: str) -> str:
    """The git credential protocol: for `get` on the configured service's exact origin
    (scheme, host and port, default ports normalized), its token (from the environment or
    the profile, as for every command); otherwise nothing, and git fails closed, since
    prompting is off. A configuration with plain http to a host other than loopback has no
    origin, so it answers nothing either."""
    if operation != "get":
        return ""
    fields: dict[str, str] = {}
    for line in request.splitlines():
        name, sep, value = line.partition("=")
        if not sep or name not in ORIGIN_FIELDS:
            continue  # `path`, `username`, `wwwauth[]`, `capability[]`: no bearing on where
        if fields.setdefault(name, value) != value:
            return ""  # the same field twice, with two values: answer neither
    try:
        found = resolve()
        service = service_origin(found.url)
    except UsageError:
        return ""
    if credential_origin(fields) != service:
        return ""
    return f"username={GIT_USER}\npassword={found.token}\n"
