"""Principals, projects (legacy settings), members, forks, packets and claims."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from forkhorse.domain.model import (
    LEGACY_SETTINGS,
    Fork,
    Packet,
    Principal,
    Project,
    ProjectSettings,
)
from forkhorse.ports.store import Store
from forkhorse.ports.store.projects import ForkLimitReached

from tests.support.store import T0

TTL = timedelta(minutes=5)


def _project(project_id: str, settings: ProjectSettings | None) -> Project:
    return Project(id=project_id, name=project_id, owner_id="o", created_at=T0, settings=settings)


def test_token_hashes_resolve_principals_until_revoked(store: Store) -> None:
    agent = Principal(kind="agent", id="a1", name="Ada", created_at=T0)
    owner = Principal(kind="owner", id="o1", name="Olga", created_at=T0)
    assert store.create_principal(agent, "h-agent")
    assert store.create_principal(owner, "h-owner")
    assert not store.create_principal(agent.model_copy(update={"id": "a2"}), "h-agent")
    assert not store.create_principal(agent, "h-other")

    assert store.find_principal_by_token_hash("h-agent") == agent
    assert store.find_principal_by_token_hash("h-owner") == owner
    assert store.find_principal_by_token_hash("nope") is None
    assert [p.id for p in store.list_agents()] == ["a1"]

    assert store.revoke_principal("a1")
    assert store.find_principal_by_token_hash("h-agent") is None
    revoked = store.get_principal("a1")
    assert revoked is not None
    assert revoked.revoked
    assert not store.revoke_principal("ghost")


def test_a_project_stored_without_settings_reads_as_not_requiring_receipts(store: Store) -> None:
    assert store.create_project(_project("legacy", None))
    assert store.create_project(_project("new", ProjectSettings(require_receipt=True)))
    assert not store.create_project(_project("new", None))

    legacy = store.get_project("legacy")
    assert legacy is not None
    assert legacy.settings == LEGACY_SETTINGS
    assert legacy.settings.model_dump() == {"requireReceipt": False}
    fresh = store.get_project("new")
    assert fresh is not None
    assert fresh.settings == ProjectSettings(require_receipt=True)
    assert [p.id for p in store.list_projects()] == ["legacy", "new"]
    assert all(p.settings is not None for p in store.list_projects())
    assert store.get_project("ghost") is None


def test_settings_change_only_the_named_project(store: Store) -> None:
    store.create_project(_project("legacy", None))
    assert store.set_settings("legacy", ProjectSettings(require_receipt=True))
    project = store.get_project("legacy")
    assert project is not None
    assert project.effective_settings.require_receipt
    assert not store.set_settings("ghost", ProjectSettings(require_receipt=True))
    assert store.get_project("ghost") is None


def test_members_forks_and_packets_round_trip(store: Store) -> None:
    store.add_member("p", "a1")
    store.add_member("p", "a1")
    store.add_member("p", "a2")
    assert store.list_members("p") == ["a1", "a2"]
    assert store.is_member("p", "a2")
    assert not store.is_member("other", "a2")
    store.add_member("other", "a2")
    assert store.list_member_projects("a2") == ["other", "p"]
    assert store.list_member_projects("a1") == ["p"]
    assert store.list_member_projects("nobody") == []

    fork = Fork(id="f1", project_id="p", name="mine", owner_agent_id="a1", created_at=T0)
    assert store.create_fork(fork)
    assert not store.create_fork(fork)
    assert store.get_fork("p", "f1") == fork
    assert store.get_fork("other", "f1") is None
    assert store.list_forks("p") == [fork]

    packet = Packet(id="k1", project_id="p", title="Do it", created_at=T0)
    assert store.create_packet(packet)
    assert not store.create_packet(packet)
    assert store.get_packet("p", "k1") == packet
    assert store.list_packets("p") == [packet]
    assert store.list_packets("other") == []


def _fork(fork_id: str, agent: str = "a1", project: str = "p") -> Fork:
    return Fork(id=fork_id, project_id=project, name=fork_id, owner_agent_id=agent, created_at=T0)


def test_an_agents_forks_in_a_project_are_bounded(store: Store) -> None:
    for index in range(3):
        assert store.create_fork(_fork(f"f{index}"), per_agent=3)
    with pytest.raises(ForkLimitReached):
        store.create_fork(_fork("f3"), per_agent=3)
    assert [fork.id for fork in store.list_forks("p")] == ["f0", "f1", "f2"]
    assert not store.create_fork(_fork("f0"), per_agent=3), "an existing id is not refused"
    assert store.create_fork(_fork("g0", agent="a2"), per_agent=3), "another agent's count"
    assert store.create_fork(_fork("f3", project="q"), per_agent=3), "another project's count"


def test_concurrent_forks_never_pass_the_bound(store: Store) -> None:
    """Twelve requests at once for an agent allowed four: four forks, eight refusals."""
    start = threading.Barrier(12, timeout=30)

    def create(index: int) -> str:
        start.wait()
        try:
            return "created" if store.create_fork(_fork(f"f{index}"), per_agent=4) else "exists"
        except ForkLimitReached:
            return "refused"

    with ThreadPoolExecutor(max_workers=12) as pool:
        outcomes = Counter(pool.map(create, range(12)))
    assert outcomes == Counter(created=4, refused=8)
    assert len(store.list_forks("p")) == 4


def test_live_claims_are_read_at_once_and_only_live_ones_count(store: Store) -> None:
    ttl = timedelta(minutes=10)
    packets = [f"k{index:03d}" for index in range(120)]  # more than one DynamoDB batch
    for index, packet in enumerate(packets):
        assert store.claim_packet(packet, f"a{index % 3}", ttl, T0) is not None
    assert store.release_claim("k000", "a0")
    assert store.claim_packet("k001", "a1", timedelta(minutes=1), T0) is not None
    later = T0 + timedelta(minutes=5)
    live = store.live_claims([*packets, "unknown", "k002"], later)
    assert sorted(live) == packets[2:]
    assert live["k002"] == store.live_claim("k002", later)
    assert store.live_claims([], later) == {}


def test_claims_are_leases_that_only_their_agent_renews(store: Store) -> None:
    first = store.claim_packet("k1", "a1", TTL, T0)
    assert first is not None
    assert first.expires_at == T0 + TTL
    assert store.claim_packet("k1", "a2", TTL, T0 + timedelta(minutes=4)) is None
    renewed = store.claim_packet("k1", "a1", TTL, T0 + timedelta(minutes=4))
    assert renewed is not None
    assert renewed.expires_at == T0 + timedelta(minutes=9)
    assert store.live_claim("k1", T0 + timedelta(minutes=8)) == renewed

    expired_at = T0 + timedelta(minutes=9)
    assert store.live_claim("k1", expired_at) is None
    taken = store.claim_packet("k1", "a2", TTL, expired_at)
    assert taken is not None
    assert taken.agent_id == "a2"

    assert not store.release_claim("k1", "a1")
    assert store.release_claim("k1", "a2")
    assert store.live_claim("k1", expired_at) is None
    assert not store.release_claim("k1", "a2")
