"""Canonical's history for `forkhorse verify-log`, read with the git CLI from a clone.

It is `domain.log_audit.CanonicalHistory` over `git rev-parse`, `git merge-base
--is-ancestor` and `git rev-list --first-parent`. A walk stops after `limit` commits (and
says so), and a commit the clone lacks is remembered, so the audit reports a stale or
partial clone instead of blaming canonical.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from forkhorse.client.errors import ClientError, UsageError

MAX_WALK = 10_000
GIT_SECONDS = 120.0
CLONE_SECONDS = 600.0
CANDIDATE_REFS = ("refs/remotes/origin/main", "refs/heads/main")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def _commit(value: str) -> str:
    if not _COMMIT.fullmatch(value):
        raise ClientError(f"not a commit id: {value[:80]!r}")
    return value


@dataclass
class GitHistory:
    """The first-parent history of `ref` in the repository at `repo`."""

    repo: Path
    ref: str
    limit: int = MAX_WALK
    missing: set[str] = field(default_factory=set)
    truncated: bool = False

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                ["git", "-C", str(self.repo), *args],
                capture_output=True,
                text=True,
                timeout=GIT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as failed:
            raise ClientError(f"git {args[0]} in {self.repo} failed: {failed}") from None

    def _known(self, commit: str) -> bool:
        found = self._git("cat-file", "-e", f"{_commit(commit)}^{{commit}}")
        if found.returncode != 0:
            self.missing.add(commit)
        return found.returncode == 0

    def tip(self) -> str | None:
        found = self._git("rev-parse", "--verify", "--quiet", f"{self.ref}^{{commit}}")
        return (found.stdout.strip() or None) if found.returncode == 0 else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if not (self._known(ancestor) and self._known(descendant)):
            return False
        return self._git("merge-base", "--is-ancestor", ancestor, descendant).returncode == 0

    def first_parent(self, since: str | None, until: str) -> list[str]:
        if not self._known(until) or (since is not None and not self._known(since)):
            return []
        excluded = [f"^{since}"] if since is not None else []
        walked = self._git(
            "rev-list", "--first-parent", f"--max-count={self.limit + 1}", until, *excluded
        )
        if walked.returncode != 0:
            raise ClientError(f"git rev-list in {self.repo} failed: {walked.stderr.strip()}")
        commits = walked.stdout.split()
        if len(commits) > self.limit:
            self.truncated = True
        return commits[: self.limit]


def open_history(repo: Path, ref: str | None) -> GitHistory:
    """The history of `ref` in a clone of canonical; by default its `origin/main` (a
    working clone) or its `main` (a bare clone)."""
    if not (repo / ".git").exists() and not (repo / "HEAD").is_file():
        raise UsageError(f"{repo} is not a git repository (pass a clone of canonical).")
    if ref is not None and ref.startswith("-"):
        raise UsageError(f"not a ref: {ref!r}")
    for candidate in (ref,) if ref else CANDIDATE_REFS:
        history = GitHistory(repo, candidate)
        if history.tip() is not None:
            return history
    wanted = ref or " or ".join(CANDIDATE_REFS)
    raise UsageError(f"{repo} has no {wanted}; pass --ref, or fetch canonical first.")


def clone_canonical(url: str, into: Path, env: dict[str, str]) -> Path:
    """A bare clone of canonical at `url`, git asking `forkhorse git-credential` (which
    answers only the configured service) for the token."""
    helper = f"!{sys.executable} -m forkhorse.cli git-credential"
    command = [
        "git", "-c", "credential.helper=", "-c", f"credential.helper={helper}",
        "clone", "--quiet", "--bare", "--", url, str(into),
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=CLONE_SECONDS,
            check=False,
            env=os.environ | {"GIT_TERMINAL_PROMPT": "0"} | env,
        )
    except (OSError, subprocess.TimeoutExpired) as failed:
        raise ClientError(f"git clone {url} failed: {failed}") from None
    if done.returncode != 0:
        raise ClientError(f"git clone {url} failed: {done.stderr.strip()[-400:]}")
    return into
