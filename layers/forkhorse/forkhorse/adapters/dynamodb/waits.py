"""FullWaits on the single table: `WAIT#<generation>` / `CHECK#<name>`, expiring through the
table's TTL attribute (`expiresAt`, seconds) once the state that held it has timed out."""

from __future__ import annotations

from datetime import datetime

from forkhorse.adapters.dynamodb.table import DynamoDbTable, Item, item_key, num_attr, str_attr
from forkhorse.ports.waits import HeldWait

CHECK = "CHECK#"


class DynamoDbFullWaits(DynamoDbTable):
    def hold(self, generation: str, check: str, wait: HeldWait, expires_at: datetime) -> None:
        item = _key(generation, check) | {
            "token": str_attr(wait.token),
            "progress": str_attr(wait.progress),
            "expiresAt": num_attr(int(expires_at.timestamp())),
        }
        self._client.put_item(TableName=self._table, Item=item)

    def peek(self, generation: str, check: str) -> HeldWait | None:
        item = self._get(_key(generation, check))
        return None if item is None else _wait(item)

    def held(self, generation: str) -> dict[str, HeldWait]:
        return {
            item["sk"]["S"].removeprefix(CHECK): _wait(item)
            for item in self._query(_pk(generation), CHECK)
            if "claimed" not in item
        }

    def claim(self, generation: str, check: str) -> HeldWait | None:
        """Marks the wait claimed with a conditional update: one caller wins."""
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key=_key(generation, check),
                UpdateExpression="SET claimed = :yes",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(claimed)",
                ExpressionAttributeValues={":yes": {"BOOL": True}},
                ReturnValues="ALL_NEW",
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            return None
        return _wait(answer["Attributes"])


def _pk(generation: str) -> str:
    return f"WAIT#{generation}"


def _key(generation: str, check: str) -> Item:
    return item_key(_pk(generation), CHECK + check)


def _wait(item: Item) -> HeldWait:
    return HeldWait(token=item["token"]["S"], progress=item["progress"]["S"])
