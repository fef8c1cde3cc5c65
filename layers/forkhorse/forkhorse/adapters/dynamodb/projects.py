"""Projects (settings and policy as attributes of their own), members, forks and
packets in DynamoDB."""

from pydantic import BaseModel

from forkhorse.adapters.dynamodb.table import (
    DynamoDbTable,
    Item,
    item_key,
    json_attr,
    num_attr,
    str_attr,
)
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


class DynamoDbProjects(DynamoDbTable):
    def create_project(self, project: Project) -> bool:
        item = {
            **item_key("PROJECTS", f"PROJECT#{project.id}"),
            "data": str_attr(project.model_dump_json(exclude={"settings", "policy"})),
            "policy": json_attr(project.policy),
        }
        if project.settings is not None:
            item["settings"] = json_attr(project.settings)
        return self._put_new(item)

    @staticmethod
    def _project_from(item: Item) -> Project:
        project = Project.model_validate_json(item["data"]["S"])
        if "settings" in item:
            settings = ProjectSettings.model_validate_json(item["settings"]["S"])
            project = project.model_copy(update={"settings": settings})
        if "policy" in item:
            policy = ProjectPolicy.model_validate_json(item["policy"]["S"])
            project = project.model_copy(update={"policy": policy})
        return with_effective_settings(project)

    def get_project(self, project_id: str) -> Project | None:
        item = self._get(item_key("PROJECTS", f"PROJECT#{project_id}"))
        return None if item is None else self._project_from(item)

    def list_projects(self) -> list[Project]:
        return [self._project_from(item) for item in self._query("PROJECTS", "PROJECT#")]

    def set_settings(self, project_id: str, settings: ProjectSettings) -> bool:
        return self._set_project_attribute(project_id, "settings", settings)

    def set_policy(self, project_id: str, policy: ProjectPolicy) -> bool:
        return self._set_project_attribute(project_id, "policy", policy)

    def _set_project_attribute(self, project_id: str, name: str, value: BaseModel) -> bool:
        """Settings and policy are attributes of their own, so each changes alone."""
        return self._conditional(
            "update_item",
            TableName=self._table,
            Key=item_key("PROJECTS", f"PROJECT#{project_id}"),
            UpdateExpression=f"SET {name} = :value",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":value": json_attr(value)},
        )

    def add_member(self, project_id: str, agent_id: str) -> None:
        """The membership on both sides, together: the project's and the agent's."""
        member = {
            **item_key(f"PROJECT#{project_id}", f"MEMBER#{agent_id}"),
            "agentId": str_attr(agent_id),
        }
        member_of = {
            **item_key(f"AGENT#{agent_id}", f"MEMBEROF#{project_id}"),
            "projectId": str_attr(project_id),
        }
        self._transact(
            *({"Put": {"TableName": self._table, "Item": item}} for item in (member, member_of))
        )

    def is_member(self, project_id: str, agent_id: str) -> bool:
        return self._get(item_key(f"PROJECT#{project_id}", f"MEMBER#{agent_id}")) is not None

    def list_members(self, project_id: str) -> list[str]:
        items = self._query(f"PROJECT#{project_id}", "MEMBER#")
        return [str(item["agentId"]["S"]) for item in items]

    def list_member_projects(self, agent_id: str) -> list[str]:
        items = self._query(f"AGENT#{agent_id}", "MEMBEROF#")
        return [str(item["projectId"]["S"]) for item in items]

    def create_fork(self, fork: Fork, per_agent: int = FORKS.per_agent) -> bool:
        """The fork and its agent's count in the project, in one transaction."""
        project = f"PROJECT#{fork.project_id}"
        counted = {
            "Update": {
                "TableName": self._table,
                "Key": item_key(project, f"AGENTFORKS#{fork.owner_agent_id}"),
                "UpdateExpression": "ADD forks :one",
                "ConditionExpression": "attribute_not_exists(forks) OR forks < :limit",
                "ExpressionAttributeValues": {":one": num_attr(1), ":limit": num_attr(per_agent)},
            }
        }
        fork_item = {**item_key(project, f"FORK#{fork.id}"), "data": json_attr(fork)}
        if self._transact(self._put_if_new(fork_item), counted):
            return True
        if self.get_fork(fork.project_id, fork.id) is None:
            raise ForkLimitReached()  # forks are never deleted: the count refused it
        return False

    def get_fork(self, project_id: str, fork_id: str) -> Fork | None:
        data = self._data(f"PROJECT#{project_id}", f"FORK#{fork_id}")
        return None if data is None else Fork.model_validate_json(data)

    def list_forks(self, project_id: str) -> list[Fork]:
        return [
            Fork.model_validate_json(d) for d in self._all_data(f"PROJECT#{project_id}", "FORK#")
        ]

    def create_packet(self, packet: Packet) -> bool:
        return self._put_new(
            {
                **item_key(f"PROJECT#{packet.project_id}", f"PACKET#{packet.id}"),
                "data": json_attr(packet),
            }
        )

    def get_packet(self, project_id: str, packet_id: str) -> Packet | None:
        data = self._data(f"PROJECT#{project_id}", f"PACKET#{packet_id}")
        return None if data is None else Packet.model_validate_json(data)

    def list_packets(self, project_id: str) -> list[Packet]:
        rows = self._all_data(f"PROJECT#{project_id}", "PACKET#")
        return [Packet.model_validate_json(data) for data in rows]
