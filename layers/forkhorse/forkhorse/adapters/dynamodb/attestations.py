"""Attestations on AWS: items in the single table, under their own key prefixes."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from forkhorse.ports.attestations import RegisteredKey

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ENVELOPE_PREFIX = "ATTEST#"
ENVELOPE_SORT_KEY = "ENVELOPE"
KEYS_PARTITION = "SIGNING_KEYS"
_ABSENT = "attribute_not_exists(pk)"


class DynamoDbAttestations:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def close(self) -> None:
        """Nothing to release: the boto3 client is owned by the caller."""

    def _put_new(self, item: dict[str, dict[str, str]]) -> bool:
        try:
            self._client.put_item(TableName=self._table, Item=item, ConditionExpression=_ABSENT)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def put_envelope(self, subject: str, envelope: str, now: datetime) -> bool:
        return self._put_new(
            {
                "pk": {"S": ENVELOPE_PREFIX + subject},
                "sk": {"S": ENVELOPE_SORT_KEY},
                "envelope": {"S": envelope},
                "writtenAt": {"S": now.isoformat()},
            }
        )

    def get_envelope(self, subject: str) -> str | None:
        response = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": ENVELOPE_PREFIX + subject}, "sk": {"S": ENVELOPE_SORT_KEY}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return None if item is None else item["envelope"]["S"]

    def register_key(self, keyid: str, public_key: str, now: datetime) -> bool:
        return self._put_new(
            {
                "pk": {"S": KEYS_PARTITION},
                "sk": {"S": keyid},
                "publicKey": {"S": public_key},
                "since": {"S": now.isoformat()},
            }
        )

    def list_keys(self) -> list[RegisteredKey]:
        paginator = self._client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": KEYS_PARTITION}},
            ConsistentRead=True,
        )
        keys = [
            RegisteredKey(
                item["sk"]["S"],
                item["publicKey"]["S"],
                datetime.fromisoformat(item["since"]["S"]),
            )
            for page in pages
            for item in page.get("Items", [])
        ]
        return sorted(keys, key=lambda key: key.since)
