"""Content-addressed records in DynamoDB: chunks and manifest in one transaction when they fit
one; else an intent, the chunks, then the manifest.

Chunks are Binary attributes under `BYTES#<n>`, and the manifest says so (`chunkFormat`).
A manifest without it is an earlier version's: its chunks are String attributes under
`CHUNK#<n>`, read as they are. The two never share keys, so a put by either version that
races one by the other cannot mix their chunks under one manifest."""

import itertools
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from forkhorse.adapters.dynamodb.table import (
    DynamoDbTable,
    Item,
    item_key,
    num_attr,
    str_attr,
    to_micros,
)
from forkhorse.domain.canonical import Chunk, StoredChunk
from forkhorse.ports.store import RecordRemoval, StaleRecord
from forkhorse.ports.store.records import fits_one_transaction

_BATCH_WRITE_LIMIT = 25
_PUT_ATTEMPTS = 3
# Items from before the collector carry no time: they count as written at the epoch.
_WRITTEN_BEFORE = "(attribute_not_exists(writtenAtUs) OR writtenAtUs < :cutoff)"
_BYTES = "bytes"
_TEXT = "text"  # the format of a manifest without `chunkFormat`
# Each chunk format's sort-key prefix, attribute and attribute type.
_CHUNK_LAYOUTS = {_BYTES: ("BYTES#", "bytes", "B"), _TEXT: ("CHUNK#", "text", "S")}


def _record_key(digest: str, sk: str) -> Item:
    return item_key(f"RECORD#{digest}", sk)


class DynamoDbRecords(DynamoDbTable):
    # A put first writes an intent (WRITING, with a token), then the chunks, then the
    # manifest in one transaction that also consumes its own intent. A collection deletes
    # a stale intent before any chunk, and each chunk only while no manifest and no intent
    # exists: so a put whose chunks were collected loses its intent and starts over, and
    # a manifest never appears over a missing chunk, however large the record.
    def _record_manifest(self, digest: str) -> Item | None:
        return self._get(_record_key(digest, "MANIFEST"))

    def _touch_manifest(self, digest: str, written: int) -> bool:
        return self._conditional(
            "update_item",
            TableName=self._table,
            Key=_record_key(digest, "MANIFEST"),
            UpdateExpression="SET writtenAtUs = :written",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":written": num_attr(written)},
        )

    def _put_intent(self, digest: str, token: str, written: int) -> None:
        item = {
            **_record_key(digest, "WRITING"),
            "token": str_attr(token),
            "writtenAtUs": num_attr(written),
        }
        self._client.put_item(TableName=self._table, Item=item)

    def _write_chunks(self, digest: str, chunks: Sequence[Chunk], written: int) -> None:
        puts = [
            {"PutRequest": {"Item": self._chunk_item(digest, index, chunk, written)}}
            for index, chunk in enumerate(chunks)
        ]
        for start in range(0, len(puts), _BATCH_WRITE_LIMIT):
            request: Any = {self._table: puts[start : start + _BATCH_WRITE_LIMIT]}
            while request:
                response = self._client.batch_write_item(RequestItems=request)
                request = response.get("UnprocessedItems") or None

    def _write_manifest(self, digest: str, chunk_count: int, written: int, token: str) -> bool:
        consume_intent = {
            "Delete": {
                "TableName": self._table,
                "Key": _record_key(digest, "WRITING"),
                "ConditionExpression": "#token = :token",
                "ExpressionAttributeNames": {"#token": "token"},
                "ExpressionAttributeValues": {":token": str_attr(token)},
            }
        }
        manifest = _manifest_item(digest, chunk_count, written)
        return self._transact(consume_intent, self._put_if_new(manifest))

    def _fits_one_transaction(self, chunks: Sequence[Chunk]) -> bool:
        return fits_one_transaction(chunks)

    def _write_whole(self, digest: str, chunks: Sequence[Chunk], written: int) -> bool:
        """Every chunk and the manifest in one transaction (False: a manifest appeared)."""
        puts = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": self._chunk_item(digest, index, chunk, written),
                }
            }
            for index, chunk in enumerate(chunks)
        ]
        manifest = _manifest_item(digest, len(chunks), written)
        return self._transact(*puts, self._put_if_new(manifest))

    def _chunk_item(self, digest: str, index: int, chunk: Chunk, written: int) -> Item:
        return {
            **_record_key(digest, f"BYTES#{index:06d}"),
            "bytes": {"B": bytes(chunk)},  # botocore takes bytes, not a view
            "writtenAtUs": num_attr(written),
        }

    def put_record_chunks(self, digest: str, chunks: Sequence[Chunk], now: datetime) -> None:
        written = to_micros(now)
        one = self._fits_one_transaction(chunks)
        for _ in range(_PUT_ATTEMPTS):
            if self._touch_manifest(digest, written):
                return  # content-addressed: the stored record is already these bytes
            if one:
                if self._write_whole(digest, chunks, written):
                    return
                continue  # a concurrent put published it: touch its manifest
            token = uuid.uuid4().hex
            self._put_intent(digest, token, written)
            self._write_chunks(digest, chunks, written)
            if self._write_manifest(digest, len(chunks), written, token):
                return
        raise RuntimeError(f"record {digest} lost its intent {_PUT_ATTEMPTS} times in a row")

    def get_record_chunks(self, digest: str) -> list[StoredChunk] | None:
        manifest = self._record_manifest(digest)
        if manifest is None:
            return None
        count = int(manifest["chunkCount"]["N"])
        chunk_format = str(manifest.get("chunkFormat", str_attr(_TEXT))["S"])
        prefix, name, kind = _CHUNK_LAYOUTS[chunk_format]
        items = itertools.islice(self._query(f"RECORD#{digest}", prefix), count)
        return [item[name][kind] for item in items]

    def stale_records(self, written_before: datetime) -> Iterator[StaleRecord]:
        # A scan is fine for a periodic sweep; a partition's items come together, so one
        # digest is yielded once unless a page boundary splits it (deletion is idempotent).
        paginator = self._client.get_paginator("scan")
        pages = paginator.paginate(
            TableName=self._table,
            FilterExpression=f"begins_with(pk, :record) AND {_WRITTEN_BEFORE}",
            ExpressionAttributeValues={
                ":record": str_attr("RECORD#"),
                ":cutoff": num_attr(to_micros(written_before)),
            },
            ProjectionExpression="pk",
        )
        previous = None
        for page in pages:
            for item in page.get("Items", []):
                digest = str(item["pk"]["S"]).removeprefix("RECORD#")
                if digest != previous:
                    previous = digest
                    yield StaleRecord(digest, self._record_manifest(digest) is not None)

    def delete_stale_record(self, digest: str, written_before: datetime) -> RecordRemoval:
        stale = {":cutoff": num_attr(to_micros(written_before))}
        manifest = self._conditional(
            "delete_item",
            TableName=self._table,
            Key=_record_key(digest, "MANIFEST"),
            ConditionExpression=f"attribute_exists(pk) AND {_WRITTEN_BEFORE}",
            ExpressionAttributeValues=stale,
        )
        if not manifest and self._record_manifest(digest) is not None:
            return RecordRemoval(manifest=False, chunks=0)  # written again since
        if not self._conditional(
            "delete_item",
            TableName=self._table,
            Key=_record_key(digest, "WRITING"),
            ConditionExpression=f"attribute_not_exists(pk) OR {_WRITTEN_BEFORE}",
            ExpressionAttributeValues=stale,
        ):
            return RecordRemoval(manifest=manifest, chunks=0)  # a put is in progress
        return RecordRemoval(manifest=manifest, chunks=self._delete_stale_chunks(digest, stale))

    def _delete_stale_chunks(self, digest: str, stale: Item) -> int:
        deleted = 0
        chunks = itertools.chain.from_iterable(
            self._query(f"RECORD#{digest}", prefix, ProjectionExpression="sk")
            for prefix, _, _ in _CHUNK_LAYOUTS.values()
        )
        for item in chunks:
            if not self._transact(
                self._absent(_record_key(digest, "MANIFEST")),
                self._absent(_record_key(digest, "WRITING")),
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": _record_key(digest, str(item["sk"]["S"])),
                        "ConditionExpression": _WRITTEN_BEFORE,
                        "ExpressionAttributeValues": stale,
                    }
                },
            ):
                break  # a put started (or rewrote this chunk): leave the rest to it
            deleted += 1
        return deleted


def _manifest_item(digest: str, chunk_count: int, written: int) -> Item:
    return {
        **_record_key(digest, "MANIFEST"),
        "chunkCount": num_attr(chunk_count),
        "chunkFormat": str_attr(_BYTES),
        "writtenAtUs": num_attr(written),
    }
