"""Smart-HTTP access rules, and who may mint the canonical write capability."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from forkhorse.domain import git_access
from forkhorse.domain.git_access import (
    CanonicalWriteCapability,
    GitPrincipal,
    RepoFacts,
    decide_git_access,
    is_valid_repo_name,
    mint_canonical_write_capability,
)

OWNER = GitPrincipal("owner-1", "owner")
OTHER_OWNER = GitPrincipal("owner-2", "owner")
AGENT = GitPrincipal("agent-a", "agent")
PEER = GitPrincipal("agent-b", "agent")
STRANGER = GitPrincipal("agent-z", "agent")
CANONICAL = RepoFacts(owner="owner-1", members=frozenset({"agent-a", "agent-b"}))
FORK_A = RepoFacts(owner="owner-1", members=frozenset({"agent-a", "agent-b"}), fork_owner="agent-a")

CASES = [
    # principal, facts, fork, operation, canonical has commits, status
    (None, CANONICAL, None, "read", True, 401),
    (OWNER, None, None, "read", True, 404),
    (OWNER, CANONICAL, None, "read", True, 200),
    (OWNER, FORK_A, "fa", "read", True, 200),
    (OWNER, CANONICAL, None, "push", False, 200),  # the initial import
    (OWNER, CANONICAL, None, "push", True, 403),  # afterwards only promote writes
    (OWNER, FORK_A, "fa", "push", True, 403),
    (OTHER_OWNER, CANONICAL, None, "read", True, 404),
    (AGENT, CANONICAL, None, "read", True, 200),
    (AGENT, CANONICAL, None, "push", False, 403),
    (AGENT, CANONICAL, None, "push", True, 403),
    (AGENT, FORK_A, "fa", "read", True, 200),
    (AGENT, FORK_A, "fa", "push", True, 200),
    (PEER, FORK_A, "fa", "read", True, 403),
    (PEER, FORK_A, "fa", "push", True, 403),
    (STRANGER, CANONICAL, None, "read", True, 404),
    (STRANGER, FORK_A, "fa", "push", True, 404),
    (AGENT, CANONICAL, "unknown", "read", True, 404),  # a fork URL with no fork facts
]


@pytest.mark.parametrize(("principal", "facts", "fork", "operation", "imported", "status"), CASES)
def test_access_rules(
    principal: GitPrincipal | None,
    facts: RepoFacts | None,
    fork: str | None,
    operation: git_access.GitOperation,
    imported: bool,
    status: int,
) -> None:
    decision = decide_git_access(
        principal, facts, fork=fork, operation=operation, canonical_has_commits=imported
    )
    assert decision.status == status
    assert decision.allowed is (status == 200)
    if status != 200:
        assert decision.message.endswith(".")


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("proj", True),
        ("a-b_c9", True),
        ("", False),
        ("..", False),
        ("a/b", False),
        ("a#b", False),
        ("-x", False),
        ("x" * 128, True),
        ("x" * 129, False),
        ("a.git", False),
    ],
)
def test_repo_names(name: str, valid: bool) -> None:
    assert is_valid_repo_name(name) is valid


def test_the_capability_cannot_be_forged() -> None:
    with pytest.raises(TypeError):
        CanonicalWriteCapability("proj", object())
    assert mint_canonical_write_capability("proj").project == "proj"


def test_only_the_promote_path_mints_canonical_write_capabilities() -> None:
    package = Path(git_access.__file__).resolve().parents[1]
    callers = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if re.search(r"\bmint_canonical_write_capability\(", path.read_text(encoding="utf-8"))
    ]
    outside_promote = [
        caller for caller in callers if caller != "domain/git_access.py" and "promot" not in caller
    ]
    assert outside_promote == []
