"""An agent's forks in a project are bounded: each is a repository and a row of `/state`."""

from __future__ import annotations

import pytest
from forkhorse.adapters.git.disk import DiskGitStore
from forkhorse.domain.limits import FORKS
from forkhorse.service.errors import Conflict

from tests.support.service import Fast, wire


def _repositories(fast: Fast, project: str) -> set[str]:
    """The repositories under the project's git directory, canonical and forks."""
    repos = fast.repos(project)
    assert isinstance(repos, DiskGitStore)
    root = repos.repo_path(None).parent
    return {str(head.parent) for head in root.rglob("HEAD")}


def test_an_agent_past_its_forks_is_refused_and_nothing_is_created(fast: Fast) -> None:
    project = fast.project(True)
    agent = fast.agent(project)
    for index in range(FORKS.per_agent):
        fast.service.projects.create_fork(agent, project, f"fork-{index}")
    repositories = _repositories(fast, project)
    assert len(repositories) == 1 + FORKS.per_agent, "canonical and each fork"
    with pytest.raises(Conflict) as refused:
        fast.service.projects.create_fork(agent, project, "one-more")
    assert (refused.value.status, wire(refused.value.body())) == (
        409,
        {"error": f"Refused: an agent may create at most {FORKS.per_agent} forks in a project."},
    )
    assert _repositories(fast, project) == repositories, "no repository was created"
    assert len(fast.state(project)["forks"]) == FORKS.per_agent
    other = fast.agent(project)
    assert fast.service.projects.create_fork(other, project, "theirs").fork.id
