"""An agent's forks in a project are bounded (each is a repository and a row of `/state`);
`/state` reads the packets' claims in one read, not one per packet."""

from __future__ import annotations

from datetime import datetime

import pytest
from forkhorse.adapters.git.disk import DiskGitStore
from forkhorse.domain.limits import FORKS
from forkhorse.domain.model import Claim
from forkhorse.service.errors import Conflict

from tests.support.service import Fast, wire
from tests.support.status import http_status


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
    assert (http_status(refused.value), wire(refused.value.body())) == (
        409,
        {"error": f"Refused: an agent may create at most {FORKS.per_agent} forks in a project."},
    )
    assert _repositories(fast, project) == repositories, "no repository was created"
    assert len(fast.state(project)["forks"]) == FORKS.per_agent
    other = fast.agent(project)
    assert fast.service.projects.create_fork(other, project, "theirs").fork.id


def test_state_reads_every_packets_claim_at_once(
    fast: Fast, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = fast.project(True)
    lanes = [fast.lane(project) for _ in range(5)]
    store = fast.runtime.store
    reads: list[int] = []
    single, batched = store.live_claim, store.live_claims

    def one(packet_id: str, now: datetime) -> Claim | None:
        reads.append(1)
        return single(packet_id, now)

    def many(packet_ids: list[str], now: datetime) -> dict[str, Claim]:
        reads.append(len(packet_ids))
        return batched(packet_ids, now)

    monkeypatch.setattr(store, "live_claim", one)
    monkeypatch.setattr(store, "live_claims", many)
    packets = fast.state(project)["packets"]
    assert reads == [5], "one read for the five packets' claims"
    assert sorted(packet["claim"]["agentId"] for packet in packets) == sorted(
        lane.agent.id for lane in lanes
    )
