"""Projects with their settings and policy, and what hangs off a project: members,
forks and packets."""

from typing import Protocol

from forkhorse.domain.limits import FORKS
from forkhorse.domain.model import Fork, Packet, Project, ProjectPolicy, ProjectSettings


class ForkLimitReached(Exception):
    """The fork's agent already has as many forks in the project as it may."""


class ProjectStore(Protocol):
    def create_project(self, project: Project) -> bool:
        """False if the id exists. `settings=None` stores a legacy project."""
        ...

    def get_project(self, project_id: str) -> Project | None:
        """The project, with `LEGACY_SETTINGS` filled in when none were stored."""
        ...

    def list_projects(self) -> list[Project]: ...

    def set_settings(self, project_id: str, settings: ProjectSettings) -> bool: ...

    def set_policy(self, project_id: str, policy: ProjectPolicy) -> bool:
        """Replace the project's policy (settings untouched); False if the project is unknown."""
        ...

    def add_member(self, project_id: str, agent_id: str) -> None: ...

    def is_member(self, project_id: str, agent_id: str) -> bool: ...

    def list_members(self, project_id: str) -> list[str]: ...

    def list_member_projects(self, agent_id: str) -> list[str]:
        """The ids of the projects the agent is a member of, in id order: read from the
        agent's side, so its cost is its memberships, not the deployment's projects."""
        ...

    def create_fork(self, fork: Fork, per_agent: int = FORKS.per_agent) -> bool:
        """False if the fork id exists in its project. Raises `ForkLimitReached` when its
        agent has `per_agent` forks there already; the count and the insert are atomic."""
        ...

    def get_fork(self, project_id: str, fork_id: str) -> Fork | None: ...

    def list_forks(self, project_id: str) -> list[Fork]: ...

    def create_packet(self, packet: Packet) -> bool: ...

    def get_packet(self, project_id: str, packet_id: str) -> Packet | None: ...

    def list_packets(self, project_id: str) -> list[Packet]: ...
