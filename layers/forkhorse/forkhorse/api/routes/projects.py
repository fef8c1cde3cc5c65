"""Projects, agents, members, forks, packets and claims."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from forkhorse.api import links
from forkhorse.api.guards import caller_of
from forkhorse.api.models import (
    AddMember,
    CreateAgent,
    CreateFork,
    CreatePacket,
    CreateProject,
    Policy,
    Settings,
)
from forkhorse.api.routes.answers import answers, ok
from forkhorse.api.routes.operations import AGENTS, FORKS, PACKETS, PROJECTS, operation
from forkhorse.domain.limits import PAGE
from forkhorse.responses import (
    ClaimBody,
    CreatedAgent,
    ForkBody,
    MemberBody,
    PacketBody,
    PacketPage,
    PolicyBody,
    ProjectBody,
    ProjectList,
    ProjectState,
    ReleasedClaim,
    RevokedAgent,
    SettingsBody,
)
from forkhorse.service.projects import Projects

CLAIM = "/projects/<project_id>/packets/<packet_id>/claim"


class ProjectRoutes:
    def __init__(self, projects: Projects) -> None:
        self._projects = projects
        self.router = Router()  # type: ignore[no-untyped-call]
        post, get = self.router.post, self.router.get
        post(
            "/projects",
            responses=answers(201, ok("The project.", links.created_project())),
            **operation("createProject", "Create a project (owner).", PROJECTS),
        )(self.create_project)
        listed = ok(
            "An owner's projects; an agent's, those it is a member of.", links.listed_projects()
        )
        get(
            "/projects",
            responses=answers(200, listed),
            **operation("listProjects", "List the caller's projects.", PROJECTS),
        )(self.list_projects)
        self.router.patch(
            "/projects/<project_id>/settings",
            **operation("setSettings", "Set whether a receipt is required (owner).", PROJECTS),
            responses=answers(200, ok("Settings.", links.in_project())),
        )(self.set_settings)
        self.router.put(
            "/projects/<project_id>/policy",
            description="The protected-checks policy, apart from the spec's settings (owner).",
            **operation("setPolicy", "Set the protected-checks policy (owner).", PROJECTS),
            responses=answers(200, ok("Policy.")),
        )(self.set_policy)
        get(
            "/projects/<project_id>/state",
            **operation("getState", "The project's forks, packets, reviews and ledger.", PROJECTS),
            responses=answers(200, ok("State.", links.project_state())),
        )(self.state)
        created_agent = ok("The agent and its token.", links.created_agent())
        post(
            "/agents",
            responses=answers(201, created_agent),
            **operation("createAgent", "Create an agent and its token (owner).", AGENTS),
        )(self.create_agent)
        self.router.delete(
            "/agents/<agent_id>",
            responses=answers(200, ok("Revoked.")),
            **operation("revokeAgent", "Revoke an agent and its token (owner).", AGENTS),
        )(self.revoke_agent)
        post(
            "/projects/<project_id>/members",
            **operation("addMember", "Make an agent a member of the project (owner).", AGENTS),
            responses=answers(201, ok("Member.", links.in_project())),
        )(self.add_member)
        post(
            "/projects/<project_id>/forks",
            **operation("createFork", "Create a fork of canonical.", FORKS),
            responses=answers(201, ok("The fork.", links.in_project())),
        )(self.create_fork)
        post(
            "/projects/<project_id>/packets",
            **operation("createPacket", "Create a work packet (owner).", PACKETS),
            responses=answers(201, ok("Packet.", links.created_packet())),
        )(self.create_packet)
        get(
            "/projects/<project_id>/packets",
            description=(
                "The project's packets in id order, a page at a time, each with its live claim"
                " (`claim` null: free to claim), for the owner and the project's members. Pass"
                " a page's `next` as `cursor` for the next page."
            ),
            responses=answers(200, ok("One page of packets.", links.packet_page())),
            **operation("listPackets", "List the project's packets and their claims.", PACKETS),
        )(self.list_packets)
        post(
            CLAIM,
            responses=answers(201, ok("The claim.", links.in_project())),
            **operation("claimPacket", "Claim a packet (no body).", PACKETS),
        )(self.claim)
        self.router.delete(
            CLAIM,
            responses=answers(200, ok("Released.")),
            **operation("releaseClaim", "Release a packet's claim (no body).", PACKETS),
        )(self.release)

    def create_project(self, body: CreateProject) -> tuple[ProjectBody, int]:
        caller = caller_of(self.router)
        return self._projects.create_project(caller, body.name, body.require_receipt), 201

    def list_projects(self) -> ProjectList:
        return self._projects.list_projects(caller_of(self.router))

    def set_settings(self, project_id: str, body: Settings) -> SettingsBody:
        caller = caller_of(self.router)
        return self._projects.set_settings(caller, project_id, body.require_receipt)

    def set_policy(self, project_id: str, body: Policy) -> PolicyBody:
        return self._projects.set_policy(caller_of(self.router), project_id, body.protect_checks)

    def state(self, project_id: str) -> ProjectState:
        return self._projects.state(caller_of(self.router), project_id)

    def create_agent(self, body: CreateAgent) -> tuple[CreatedAgent, int]:
        return self._projects.create_agent(caller_of(self.router), body.name), 201

    def revoke_agent(self, agent_id: str) -> RevokedAgent:
        return self._projects.revoke_agent(caller_of(self.router), agent_id)

    def add_member(self, project_id: str, body: AddMember) -> tuple[MemberBody, int]:
        return self._projects.add_member(caller_of(self.router), project_id, body.agent_id), 201

    def create_fork(self, project_id: str, body: CreateFork) -> tuple[ForkBody, int]:
        return self._projects.create_fork(caller_of(self.router), project_id, body.name), 201

    def create_packet(self, project_id: str, body: CreatePacket) -> tuple[PacketBody, int]:
        return self._projects.create_packet(caller_of(self.router), project_id, body.title), 201

    def list_packets(
        self,
        project_id: str,
        cursor: Annotated[str | None, Query(description="A page's `next`.")] = None,
        limit: Annotated[int | None, Query(description=f"1 to {PAGE.max_size}.")] = None,
    ) -> PacketPage:
        return self._projects.list_packets(caller_of(self.router), project_id, cursor, limit)

    def claim(self, project_id: str, packet_id: str) -> tuple[ClaimBody, int]:
        return self._projects.claim(caller_of(self.router), project_id, packet_id), 201

    def release(self, project_id: str, packet_id: str) -> ReleasedClaim:
        return self._projects.release(caller_of(self.router), project_id, packet_id)
