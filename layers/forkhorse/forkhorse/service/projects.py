"""Projects, agents, members, forks, packets and claims."""

from __future__ import annotations

import re
from datetime import datetime

from forkhorse.domain.limits import FORKS
from forkhorse.domain.model import (
    Claim,
    Fork,
    Packet,
    Principal,
    Project,
    ProjectPolicy,
    ProjectSettings,
)
from forkhorse.ports.store import Store
from forkhorse.ports.store.projects import ForkLimitReached
from forkhorse.responses import (
    ClaimBody,
    CreatedAgent,
    ForkBody,
    MemberBody,
    MemberView,
    PacketBody,
    PacketPage,
    PacketState,
    PolicyBody,
    ProjectBody,
    ProjectList,
    ProjectState,
    ProjectView,
    ReleasedClaim,
    RevokedAgent,
    RevokedAgentView,
    SettingsBody,
)
from forkhorse.service.context import Context
from forkhorse.service.errors import Conflict, NotFound
from forkhorse.service.identity import Caller, new_id, new_token, token_hash
from forkhorse.service.listings import Listings, newest_ledger, review_views
from forkhorse.service.log_events import policy_entry, settings_entry
from forkhorse.service.views import (
    agent_view,
    claim_view,
    fork_view,
    packet_state,
    packet_view,
    project_view,
)

FORK_LIMIT_MESSAGE = f"Refused: an agent may create at most {FORKS.per_agent} forks in a project."
_SLUG_JUNK = re.compile(r"[^a-z0-9]+")


def _slug(name: str, fallback: str) -> str:
    slug = _SLUG_JUNK.sub("-", name.lower()).strip("-")[:40].strip("-")
    return slug or fallback


def _packet_states(store: Store, project_id: str, now: datetime) -> list[PacketState]:
    """Every packet with its live claim, the claims read at once."""
    packets = store.list_packets(project_id)
    claims = store.live_claims([packet.id for packet in packets], now)
    return [packet_state(packet, claims.get(packet.id)) for packet in packets]


class Projects:
    def __init__(self, context: Context) -> None:
        self._c = context

    # --- principals ------------------------------------------------------------------
    def create_principal(self, kind: str, name: str) -> tuple[Principal, str]:
        """A new owner or agent and its token (the token is never stored)."""
        principal = Principal(
            kind="owner" if kind == "owner" else "agent",
            id=new_id(_slug(name, kind)),
            name=name,
            created_at=self._c.clock.now(),
        )
        token = new_token()
        if not self._c.store.create_principal(principal, token_hash(token)):
            raise Conflict("That principal already exists.")
        return principal, token

    def create_agent(self, caller: Caller, name: str) -> CreatedAgent:
        self._c.require_owner(caller, "create agents")
        agent, token = self.create_principal("agent", name)
        return CreatedAgent(agent=agent_view(agent), token=token)

    def revoke_agent(self, caller: Caller, agent_id: str) -> RevokedAgent:
        self._c.require_owner(caller, "revoke agents")
        agent = self._c.store.get_principal(agent_id)
        if agent is None or agent.kind != "agent":
            raise NotFound("Agent not found.")
        self._c.store.revoke_principal(agent_id)
        return RevokedAgent(agent=RevokedAgentView(id=agent.id, name=agent.name, revoked=True))

    # --- projects --------------------------------------------------------------------
    def create_project(self, caller: Caller, name: str, require_receipt: bool) -> ProjectBody:
        self._c.require_owner(caller, "create projects")
        project = Project(
            id=new_id(_slug(name, "project")),
            name=name,
            owner_id=caller.id,
            created_at=self._c.clock.now(),
            settings=ProjectSettings(require_receipt=require_receipt),
        )
        self._c.repos(project.id).create_canonical()
        entry = settings_entry(project.id, project.effective_settings, project.created_at)
        if not self._c.gate_log.earned(entry, lambda: self._c.store.create_project(project)):
            raise Conflict("That project already exists.")
        return ProjectBody(project=project_view(project, None, self._c.settings.public_url))

    def list_projects(self, caller: Caller) -> ProjectList:
        """An owner's own projects; an agent's, the projects it is a member of."""
        store = self._c.store
        if caller.is_owner:
            shown = [p for p in store.list_projects() if p.owner_id == caller.id]
        else:
            found = (store.get_project(p) for p in store.list_member_projects(caller.id))
            shown = [project for project in found if project is not None]
        return ProjectList(projects=[self._project_view(project) for project in shown])

    def _project_view(self, project: Project) -> ProjectView:
        head = self._c.repos(project.id).head()
        return project_view(project, head, self._c.settings.public_url)

    def set_settings(self, caller: Caller, project_id: str, require_receipt: bool) -> SettingsBody:
        project = self._c.owned_project(caller, project_id, "change settings")
        settings = ProjectSettings(require_receipt=require_receipt)
        entry = settings_entry(project.id, settings, self._c.clock.now())
        if not self._c.gate_log.earned(
            entry, lambda: self._c.store.set_settings(project.id, settings)
        ):
            raise NotFound("Project not found.")
        return SettingsBody(settings=settings)

    def set_policy(self, caller: Caller, project_id: str, protect_checks: bool) -> PolicyBody:
        project = self._c.owned_project(caller, project_id, "change the policy")
        policy = ProjectPolicy(protect_checks=protect_checks)
        entry = policy_entry(project.id, policy, self._c.clock.now())
        if not self._c.gate_log.earned(entry, lambda: self._c.store.set_policy(project.id, policy)):
            raise NotFound("Project not found.")
        return PolicyBody(policy=policy)

    def state(self, caller: Caller, project_id: str) -> ProjectState:
        """The project as the caller may see it: an agent sees canonical, its own forks and
        the reviews `listings.may_see_review` allows. Only the active reviews and the newest
        ledger entries are listed (`service.listings` says which); the rest are a page away
        at `GET .../reviews` and `GET .../ledger`."""
        project = self._c.visible_project(caller, project_id, "read project state")
        store, base = self._c.store, self._c.settings.public_url
        repos = self._c.repos(project.id)
        ledger, ledger_next = newest_ledger(store, project.id)
        now = self._c.clock.now()
        return ProjectState(
            project=self._project_view(project),
            forks=[
                fork_view(fork, repos.head(fork.id), base)
                for fork in store.list_forks(project.id)
                if caller.is_owner or fork.owner_agent_id == caller.id
            ],
            packets=_packet_states(store, project.id, now),
            reviews=review_views(caller, store, project.id, store.list_active_reviews(project.id)),
            ledger=ledger,
            ledger_next=ledger_next,
        )

    # --- members, forks, packets, claims --------------------------------------------
    def add_member(self, caller: Caller, project_id: str, agent_id: str) -> MemberBody:
        project = self._c.owned_project(caller, project_id, "add members")
        agent = self._c.store.get_principal(agent_id)
        if agent is None or agent.kind != "agent" or agent.revoked:
            raise NotFound("Agent not found.")
        self._c.store.add_member(project.id, agent.id)
        return MemberBody(member=MemberView(agent_id=agent.id))

    def create_fork(self, caller: Caller, project_id: str, name: str) -> ForkBody:
        project = self._c.member_project(caller, project_id, "create forks")
        fork = Fork(
            id=new_id(_slug(name, "fork")),
            project_id=project.id,
            name=name,
            owner_agent_id=caller.id,
            created_at=self._c.clock.now(),
        )
        if self._forks_of(caller.id, project.id) >= FORKS.per_agent:
            raise Conflict(FORK_LIMIT_MESSAGE)  # before the repository: nothing is created
        head = self._c.repos(project.id).create_fork(fork.id)
        try:
            created = self._c.store.create_fork(fork)
        except ForkLimitReached:
            raise Conflict(FORK_LIMIT_MESSAGE) from None  # a concurrent request took the last
        if not created:
            raise Conflict("That fork already exists.")
        return ForkBody(fork=fork_view(fork, head, self._c.settings.public_url))

    def _forks_of(self, agent_id: str, project_id: str) -> int:
        return sum(fork.owner_agent_id == agent_id for fork in self._c.store.list_forks(project_id))

    def create_packet(self, caller: Caller, project_id: str, title: str) -> PacketBody:
        project = self._c.owned_project(caller, project_id, "create packets")
        packet = Packet(
            id=new_id("packet"), project_id=project.id, title=title, created_at=self._c.clock.now()
        )
        if not self._c.store.create_packet(packet):
            raise Conflict("That packet already exists.")
        return PacketBody(packet=packet_view(packet))

    def list_packets(
        self, caller: Caller, project_id: str, cursor: str | None, limit: int | None
    ) -> PacketPage:
        """One page of the project's packets with their live claims (`Listings.packets`)."""
        return Listings(self._c).packets(caller, project_id, cursor, limit)

    def _packet(self, caller: Caller, project_id: str, packet_id: str, action: str) -> Packet:
        project = self._c.member_project(caller, project_id, action)
        packet = self._c.store.get_packet(project.id, packet_id)
        if packet is None:
            raise NotFound("Packet not found.")
        return packet

    def claim(self, caller: Caller, project_id: str, packet_id: str) -> ClaimBody:
        """Claim or renew: a claim is a lease that its holder renews by claiming again."""
        packet = self._packet(caller, project_id, packet_id, "claim packets")
        claim: Claim | None = self._c.store.claim_packet(
            packet.id, caller.id, self._c.settings.claim_ttl, self._c.clock.now()
        )
        if claim is None:
            raise Conflict("Another agent holds a live claim on this packet.")
        return ClaimBody(claim=claim_view(claim))

    def release(self, caller: Caller, project_id: str, packet_id: str) -> ReleasedClaim:
        packet = self._packet(caller, project_id, packet_id, "release claims")
        if not self._c.store.release_claim(packet.id, caller.id):
            raise NotFound("This agent holds no claim on the packet.")
        return ReleasedClaim(claim=None)
