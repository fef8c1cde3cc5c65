"""Projects, members, forks and packets in SQLite."""

from pydantic import BaseModel

from forkhorse.adapters.sqlite.database import SqliteDatabase, dump
from forkhorse.domain.limits import FORKS
from forkhorse.domain.model import (
    Fork,
    Packet,
    Project,
    ProjectPolicy,
    ProjectSettings,
    with_effective_settings,
)
from forkhorse.ports.store.projects import ForkLimitReached


class SqliteProjects(SqliteDatabase):
    def create_project(self, project: Project) -> bool:
        return self._insert(
            "INSERT OR IGNORE INTO projects (id, data) VALUES (?, ?)", project.id, dump(project)
        )

    def get_project(self, project_id: str) -> Project | None:
        data = self._one("SELECT data FROM projects WHERE id = ?", project_id)
        return None if data is None else with_effective_settings(Project.model_validate_json(data))

    def list_projects(self) -> list[Project]:
        rows = self._all("SELECT data FROM projects ORDER BY id")
        return [with_effective_settings(Project.model_validate_json(row)) for row in rows]

    def set_settings(self, project_id: str, settings: ProjectSettings) -> bool:
        return self._update_project(project_id, settings=settings)

    def set_policy(self, project_id: str, policy: ProjectPolicy) -> bool:
        return self._update_project(project_id, policy=policy)

    def _update_project(self, project_id: str, **update: BaseModel) -> bool:
        with self._write() as conn:
            found = conn.execute("SELECT data FROM projects WHERE id = ?", (project_id,)).fetchone()
            if found is None:
                return False
            project = Project.model_validate_json(found[0]).model_copy(update=update)
            conn.execute("UPDATE projects SET data = ? WHERE id = ?", (dump(project), project_id))
            return True

    def add_member(self, project_id: str, agent_id: str) -> None:
        self._insert("INSERT OR IGNORE INTO members VALUES (?, ?)", project_id, agent_id)

    def is_member(self, project_id: str, agent_id: str) -> bool:
        sql = "SELECT agent_id FROM members WHERE project_id = ? AND agent_id = ?"
        return self._one(sql, project_id, agent_id) is not None

    def list_members(self, project_id: str) -> list[str]:
        sql = "SELECT agent_id FROM members WHERE project_id = ? ORDER BY agent_id"
        return self._all(sql, project_id)

    def list_member_projects(self, agent_id: str) -> list[str]:
        sql = "SELECT project_id FROM members WHERE agent_id = ? ORDER BY project_id"
        return self._all(sql, agent_id)

    def create_fork(self, fork: Fork, per_agent: int = FORKS.per_agent) -> bool:
        inserted = self._insert(
            "INSERT OR IGNORE INTO forks SELECT ?, ?, ? WHERE (SELECT COUNT(*) FROM forks"
            " WHERE project_id = ? AND data ->> '$.owner_agent_id' = ?) < ?",
            *(fork.project_id, fork.id, dump(fork)),
            *(fork.project_id, fork.owner_agent_id, per_agent),
        )
        if not inserted and self.get_fork(fork.project_id, fork.id) is None:
            raise ForkLimitReached()  # forks are never deleted: the count refused it
        return inserted

    def get_fork(self, project_id: str, fork_id: str) -> Fork | None:
        sql = "SELECT data FROM forks WHERE project_id = ? AND id = ?"
        data = self._one(sql, project_id, fork_id)
        return None if data is None else Fork.model_validate_json(data)

    def list_forks(self, project_id: str) -> list[Fork]:
        rows = self._all("SELECT data FROM forks WHERE project_id = ? ORDER BY id", project_id)
        return [Fork.model_validate_json(row) for row in rows]

    def create_packet(self, packet: Packet) -> bool:
        return self._insert(
            "INSERT OR IGNORE INTO packets VALUES (?, ?, ?)",
            packet.project_id,
            packet.id,
            dump(packet),
        )

    def get_packet(self, project_id: str, packet_id: str) -> Packet | None:
        sql = "SELECT data FROM packets WHERE project_id = ? AND id = ?"
        data = self._one(sql, project_id, packet_id)
        return None if data is None else Packet.model_validate_json(data)

    def list_packets(self, project_id: str) -> list[Packet]:
        rows = self._all("SELECT data FROM packets WHERE project_id = ? ORDER BY id", project_id)
        return [Packet.model_validate_json(row) for row in rows]
