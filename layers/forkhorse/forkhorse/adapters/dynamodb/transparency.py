"""The transparency log's ledger on AWS: items in the single table.

Layout (pk / sk):
  LOG / HEAD                 size, published, previous and the newest signed checkpoint
  LOG / CHECK                the newest self-check's report (JSON), kept off the head so
                             that an append, which rewrites the head, stays a small write
  LOG#<n> / ENTRY#<index>    the entries of bundle n (indexes n*256 to n*256+255): one
                             partition per bundle, so reading a bundle is one bounded query
  LOGKEY#<key> / KEY         the index an entry was logged at under its key
  LOGINTENTS / <key>         an entry noted before its object is written (`intend`), gone
                             once it is appended: what a crash left, for the repair

An append is one TransactWriteItems: the head's size moves from the size the appender read
to the next (the conditional write on the tree size), and the entry and its key item are
put where none is. Two appends at one size cannot both succeed, and a key is logged once;
a cancelled append reads the key to tell a retried append (the key is there) from a lost
race (it is not). The key's intent is deleted after the append, apart from it: a crash in
between leaves an intent whose append the repair finds done.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from forkhorse.adapters.dynamodb.table import DynamoDbTable, Item, item_key, num_attr, str_attr
from forkhorse.domain.tiles import TILE_WIDTH
from forkhorse.ports.transparency import Appended, Intent, LogHead

LOG_PARTITION = "LOG"
HEAD = "HEAD"
CHECK = "CHECK"
ENTRY = "ENTRY#"
KEY_PREFIX = "LOGKEY#"
KEY_SORT = "KEY"
INTENTS = "LOGINTENTS"
# Why a transaction was cancelled when another append won: its conditions, or a conflict
# with that append's transaction in flight. Any other reason is an error, not a lost race.
_LOST_RACE = frozenset({"None", "ConditionalCheckFailed", "TransactionConflict"})
# A publish that meets an append's transaction in flight is retried this many times.
PUBLISH_ATTEMPTS = 8
_PUBLISH_NAMES = {"#published": "published", "#previous": "previous", "#checkpoint": "checkpoint"}


def bundle_partition(index: int) -> str:
    return f"{LOG_PARTITION}#{index // TILE_WIDTH}"


def entry_sort_key(index: int) -> str:
    return f"{ENTRY}{index:020d}"


def _number(item: Item, name: str) -> int:
    return int(item[name]["N"]) if name in item else 0


class DynamoDbLogLedger(DynamoDbTable):
    def head(self) -> LogHead:
        item = self._get(item_key(LOG_PARTITION, HEAD)) or {}
        checkpoint = item.get("checkpoint")
        return LogHead(
            size=_number(item, "size"),
            published=_number(item, "published"),
            checkpoint=None if checkpoint is None else str(checkpoint["S"]),
            previous=_number(item, "previous"),
        )

    def append(self, size: int, key: str, entry: bytes, now: datetime) -> Appended | None:
        entry_item = item_key(bundle_partition(size), entry_sort_key(size)) | {
            "entry": {"B": entry},
            "key": str_attr(key),
            "writtenAt": str_attr(now.isoformat()),
        }
        key_item = item_key(KEY_PREFIX + key, KEY_SORT) | {"index": num_attr(size)}
        operations: list[Any] = [
            self._head_moves(size),
            self._put_if_new(entry_item),
            self._put_if_new(key_item),
        ]
        try:
            self._client.transact_write_items(TransactItems=operations)
        except ClientError as error:
            if not _lost_race(error):
                raise
            logged = self.index_of(key)
            if logged is None:
                return None
            self.drop_intent(key)
            return Appended(logged, new=False)
        self.drop_intent(key)
        return Appended(size, new=True)

    def _head_moves(self, size: int) -> Item:
        """The head's size from `size` to the next; a head not yet written holds none."""
        held = "#size = :size" if size else "(attribute_not_exists(#size) OR #size = :size)"
        return {
            "Update": {
                "TableName": self._table,
                "Key": item_key(LOG_PARTITION, HEAD),
                "UpdateExpression": "SET #size = :next",
                "ConditionExpression": held,
                "ExpressionAttributeNames": {"#size": "size"},
                "ExpressionAttributeValues": {":size": num_attr(size), ":next": num_attr(size + 1)},
            }
        }

    def intend(self, key: str, entry: bytes, now: datetime) -> None:
        item = item_key(INTENTS, key) | {"entry": {"B": entry}, "at": str_attr(now.isoformat())}
        self._client.put_item(TableName=self._table, Item=item)

    def intents(self, limit: int) -> list[Intent]:
        """The oldest first. Outstanding intents are the appends in flight and what crashes
        left, so their partition is read whole and sorted here."""
        found = [
            Intent(
                item["sk"]["S"], bytes(item["entry"]["B"]), datetime.fromisoformat(item["at"]["S"])
            )
            for item in self._partition("pk = :pk", {":pk": str_attr(INTENTS)})
        ]
        return sorted(found, key=lambda intent: (intent.at, intent.key))[:limit]

    def drop_intent(self, key: str) -> None:
        self._client.delete_item(TableName=self._table, Key=item_key(INTENTS, key))

    def index_of(self, key: str) -> int | None:
        item = self._get(item_key(KEY_PREFIX + key, KEY_SORT))
        return None if item is None else int(item["index"]["N"])

    def entries(self, start: int, end: int) -> list[bytes]:
        """Bundle by bundle, one query each, stopping at the first index the ledger lacks."""
        found: list[bytes] = []
        index = max(start, 0)
        while index < end:
            stop = min(end, (index // TILE_WIDTH + 1) * TILE_WIDTH)
            for at, entry in self._bundle_rows(index, stop):
                if at != index:
                    return found  # a gap: the entries stop where the ledger stops being whole
                found.append(entry)
                index += 1
            if index < stop:
                return found  # the bundle ends early: so does the ledger
        return found

    def _bundle_rows(self, start: int, stop: int) -> list[tuple[int, bytes]]:
        """The rows at [start, stop), all within one bundle, in index order."""
        rows = self._partition(
            "pk = :pk AND sk BETWEEN :first AND :last",
            {
                ":pk": str_attr(bundle_partition(start)),
                ":first": str_attr(entry_sort_key(start)),
                ":last": str_attr(entry_sort_key(stop - 1)),
            },
        )
        return [
            (int(item["sk"]["S"].removeprefix(ENTRY)), bytes(item["entry"]["B"])) for item in rows
        ]

    def _partition(self, condition: str, values: dict[str, Any]) -> Iterator[Item]:
        """The items a key condition selects, in sort key order, every page of them."""
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
        )
        for page in pages:
            yield from page.get("Items", [])

    def publish(self, published: int, size: int, checkpoint: str) -> bool:
        """Monotonic: only over the checkpoint of `published`, only to a larger tree (or to
        the first checkpoint, of any size)."""
        held = "#published = :published"
        if not published:
            held = "(attribute_not_exists(#published) OR #published = :published)"
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": item_key(LOG_PARTITION, HEAD),
            "UpdateExpression": (
                "SET #previous = :published, #published = :size, #checkpoint = :checkpoint"
            ),
            "ConditionExpression": (
                f"{held} AND (attribute_not_exists(#checkpoint) OR #published < :size)"
            ),
            "ExpressionAttributeNames": _PUBLISH_NAMES,
            "ExpressionAttributeValues": {
                ":published": num_attr(published),
                ":size": num_attr(size),
                ":checkpoint": str_attr(checkpoint),
            },
        }
        for _ in range(PUBLISH_ATTEMPTS):
            try:
                return self._conditional("update_item", **request)
            except ClientError as error:
                if _code(error) != "TransactionConflictException":
                    raise
        raise RuntimeError(f"{PUBLISH_ATTEMPTS} publishes in a row met an append in flight")

    def record_check(self, report: str) -> None:
        item = item_key(LOG_PARTITION, CHECK) | {"report": str_attr(report)}
        self._client.put_item(TableName=self._table, Item=item)

    def last_check(self) -> str | None:
        item = self._get(item_key(LOG_PARTITION, CHECK))
        return None if item is None else str(item["report"]["S"])


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _lost_race(error: ClientError) -> bool:
    if _code(error) != "TransactionCanceledException":
        return False
    reasons: list[dict[str, Any]] = error.response.get("CancellationReasons", [])  # type: ignore[assignment]
    return all(reason.get("Code", "None") in _LOST_RACE for reason in reasons)
