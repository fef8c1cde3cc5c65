"""The AWS Store's table: one DynamoDB table (pk/sk strings), conditional writes and transactions.

Layout (pk / sk):
  PRINCIPALS / PRINCIPAL#<id>          principal, its kind and token hash
  TOKEN#<hash> / TOKEN                 token hash -> principal id
  PROJECTS / PROJECT#<id>              project (+ `settings`, absent on legacy projects; + `policy`)
  PROJECT#<p> / MEMBER#<agent>, FORK#<id>, PACKET#<id>,
               PROMOTION#<id>, PROMOTION-FENCE, LEDGER#<promoted>#<promotion>, LEASE,
               LATEST#<fork>#<packet> (reviewId, createdUs: the active review of a packet
               from a fork, so `/state` reads the active set without the history),
               PUBLISHED#<commit> (a done promotion put it on canonical),
               AGENTFORKS#<agent> (`forks`: how many forks the agent created there)
  AGENT#<agent> / MEMBEROF#<p>         the agent's side of a membership (written with MEMBER#)
  REVIEWS#<p> / REVIEW#<created>#<id>  the project's review history (pointers), apart from
                                       the project's own partition
  CLAIM#<packet> / CLAIM               the packet's claim (agentId, untilUs)
  REVIEW#<id> / REVIEW                 review + current execution (exec* attributes) + approval
  REVIEW#<id> / FLOW#<digest>          an attached Flow-Next review receipt
  REVIEW#<id> / PROMOTION-JOB          the review's latest requested promotion (its id)
  REVIEW#<id> / PROMOTED               the review's latest done promotion and its ledger entry
  RUNNING / REVIEW#<id>                set of running executions, for restart recovery
  RECORD#<digest> / BYTES#<n>, MANIFEST   immutable record chunks (Binary; the manifest's
                                       chunkFormat "bytes"), manifest written last; records
                                       of earlier versions keep String chunks at CHUNK#<n>
  RECORD#<digest> / WRITING            an unfinished put's intent (see records.py)
  WAIT#<generation> / CHECK#<name>     a full check's held task token (waits.py; TTL expiresAt)
  LOG / HEAD, CHECK; LOG#<bundle> / ENTRY#<index>; LOGKEY#<key> / KEY; LOGINTENTS / <key>
                                       the transparency log's ledger (transparency.py)

Times are stored as integer microseconds since the epoch (`*Us` attributes), so
conditions compare them without the table's clock; none of them is the table's
TTL attribute, because a deleted lease would reset its fencing token.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

Item = dict[str, Any]
BATCH_GET_LIMIT = 100  # keys per BatchGetItem request
_CONDITION_FAILURES = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def str_attr(value: str) -> dict[str, str]:
    return {"S": value}


def num_attr(value: int) -> dict[str, str]:
    return {"N": str(value)}


def to_micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def item_key(pk: str, sk: str) -> Item:
    return {"pk": str_attr(pk), "sk": str_attr(sk)}


def json_attr(model: BaseModel) -> dict[str, str]:
    return str_attr(model.model_dump_json())


def _condition_failed(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in _CONDITION_FAILURES


class DynamoDbTable:
    """One table and its client; the aggregates' adapters build on its reads, conditional
    writes and transactions."""

    def __init__(self, client: "DynamoDBClient", table_name: str) -> None:
        self._client = client
        self._table = table_name

    def close(self) -> None:
        """Nothing to release: the boto3 client is owned by the caller."""

    def _get(self, key: Item) -> Item | None:
        response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        return response.get("Item")

    def _query(self, pk: str, sk_prefix: str, **projection: Any) -> Iterator[Item]:
        paginator = self._client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": str_attr(pk), ":prefix": str_attr(sk_prefix)},
            ConsistentRead=True,
            **projection,
        )
        for page in pages:
            yield from page.get("Items", [])

    def _batch_get(self, keys: list[Item]) -> Iterator[Item]:
        """The items that exist among `keys`, in no particular order."""
        for start in range(0, len(keys), BATCH_GET_LIMIT):
            chunk = keys[start : start + BATCH_GET_LIMIT]
            request: Any = {self._table: {"Keys": chunk, "ConsistentRead": True}}
            while request:
                response = self._client.batch_get_item(RequestItems=request)
                yield from response.get("Responses", {}).get(self._table, [])
                request = response.get("UnprocessedKeys") or None

    def _conditional(self, action: str, **request: Any) -> bool:
        """Run one conditional write or transaction; False when its condition failed."""
        try:
            getattr(self._client, action)(**request)
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    def _put_new(self, item: Item) -> bool:
        return self._conditional(
            "put_item",
            TableName=self._table,
            Item=item,
            ConditionExpression="attribute_not_exists(pk)",
        )

    def _transact(self, *operations: Item) -> bool:
        return self._conditional("transact_write_items", TransactItems=list(operations))

    def _data(self, pk: str, sk: str) -> str | None:
        item = self._get(item_key(pk, sk))
        return None if item is None else str(item["data"]["S"])

    def _all_data(self, pk: str, sk_prefix: str) -> list[str]:
        return [str(item["data"]["S"]) for item in self._query(pk, sk_prefix)]

    def _put_if_new(self, item: Item) -> Item:
        return {
            "Put": {
                "TableName": self._table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _absent(self, key: Item) -> Item:
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": key,
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
