"""Who may read or push which repository over git smart HTTP. Pure rules, no I/O.

- The project owner reads everything. It may push canonical only while canonical has no
  commits (the initial import); afterwards only the promote path writes canonical.
- A member agent reads canonical and its own forks, and pushes only to forks it owns.
- Everything else is refused with a clear 401, 403 or 404 sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

GitOperation = Literal["read", "push"]
PrincipalKind = Literal["owner", "agent"]

_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

UNAUTHENTICATED = (
    "Authentication required: use HTTP Basic with your Forkhorse token as the password."
)
NOT_FOUND = "Repository not found."
CANONICAL_IMPORTED = (
    "Canonical accepts a push only for its initial import; later changes arrive through promote."
)
CANONICAL_PROMOTE_ONLY = "Only the promote path writes canonical."
FORK_NOT_OWNED_PUSH = "Agents may push only to forks they own."
FORK_NOT_OWNED_READ = "Agents may read only canonical and forks they own."
FORK_OWNER_ONLY = "Only the agent that owns a fork may push to it."


@dataclass(frozen=True)
class GitPrincipal:
    """The caller behind a Forkhorse token."""

    id: str
    kind: PrincipalKind


@dataclass(frozen=True)
class RepoFacts:
    """What the Store knows about a project and, for a fork URL, that fork."""

    owner: str
    members: frozenset[str]
    fork_owner: str | None = None


@dataclass(frozen=True)
class AccessDecision:
    status: Literal[200, 401, 403, 404]
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


ALLOWED = AccessDecision(200)


def is_valid_repo_name(name: str) -> bool:
    """Project and fork ids that are safe as one path segment and one key component."""
    return _REPO_NAME.fullmatch(name) is not None


def decide_git_access(
    principal: GitPrincipal | None,
    facts: RepoFacts | None,
    *,
    fork: str | None,
    operation: GitOperation,
    canonical_has_commits: bool,
) -> AccessDecision:
    """Decide one smart-HTTP request. `facts` is None when the project or fork is unknown."""
    if principal is None:
        return AccessDecision(401, UNAUTHENTICATED)
    if facts is None or (fork is not None and facts.fork_owner is None):
        return AccessDecision(404, NOT_FOUND)
    if principal.kind == "owner":
        return _owner_access(principal, facts, fork, operation, canonical_has_commits)
    return _agent_access(principal, facts, fork, operation)


def _owner_access(
    principal: GitPrincipal,
    facts: RepoFacts,
    fork: str | None,
    operation: GitOperation,
    canonical_has_commits: bool,
) -> AccessDecision:
    if principal.id != facts.owner:
        return AccessDecision(404, NOT_FOUND)
    if operation == "read":
        return ALLOWED
    if fork is not None:
        return AccessDecision(403, FORK_OWNER_ONLY)
    if canonical_has_commits:
        return AccessDecision(403, CANONICAL_IMPORTED)
    return ALLOWED


def _agent_access(
    principal: GitPrincipal, facts: RepoFacts, fork: str | None, operation: GitOperation
) -> AccessDecision:
    if principal.id not in facts.members:
        # Non-members learn nothing about the project, not even that it exists.
        return AccessDecision(404, NOT_FOUND)
    if fork is None:
        return ALLOWED if operation == "read" else AccessDecision(403, CANONICAL_PROMOTE_ONLY)
    if facts.fork_owner == principal.id:
        return ALLOWED
    return AccessDecision(403, FORK_NOT_OWNED_READ if operation == "read" else FORK_NOT_OWNED_PUSH)


_MINT_KEY = object()


@dataclass(frozen=True)
class CanonicalWriteCapability:
    """Permission to compare-and-set one project's canonical refs.

    Only `mint_canonical_write_capability` creates one, and only the promote path may call
    it (a test scans the package for other callers).
    """

    project: str
    _key: object = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._key is not _MINT_KEY:
            raise TypeError("Only the promote path mints a canonical write capability.")


def mint_canonical_write_capability(project: str) -> CanonicalWriteCapability:
    """Mint the canonical write capability. Call it only from the promote path."""
    return CanonicalWriteCapability(project, _MINT_KEY)
