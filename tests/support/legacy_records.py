"""Records as versions before bytes chunks stored them: text chunks of at most 16,384 UTF-16
code units (as JavaScript counts string length), never split inside a surrogate pair; in
DynamoDB String attributes under `CHUNK#<n>` and a manifest without `chunkFormat`, in
SQLite TEXT rows. Every such record must stay readable under its digest."""

from typing import Any

from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.adapters.sqlite.database import to_micros
from forkhorse.ports.store import Store

from tests.support.store import T0

LEGACY_CHUNK_CODE_UNITS = 16_384
_UTF16_UNIT = 2


def legacy_text_chunks(data: bytes, max_units: int = LEGACY_CHUNK_CODE_UNITS) -> list[str]:
    """The text chunks an earlier version stored for `data` (its chunker, as it was)."""
    units = data.decode("utf-8").encode("utf-16-le", "surrogatepass")
    step = max_units * _UTF16_UNIT
    chunks: list[str] = []
    start = 0
    while start < len(units):
        end = min(start + step, len(units))
        if end < len(units) and 0xD8 <= units[end - 1] <= 0xDB:  # a high surrogate ends it
            end -= _UTF16_UNIT
        chunks.append(units[start:end].decode("utf-16-le", "surrogatepass"))
        start = end
    return chunks


def put_legacy_record(store: Store, digest: str, chunks: list[str]) -> None:
    """Store `chunks` under `digest` exactly as an earlier version laid them out."""
    if isinstance(store, SqliteStore):
        with store._write() as conn:
            conn.executemany(
                "INSERT INTO record_chunks VALUES (?, ?, ?, ?)",
                ((digest, index, chunk, to_micros(T0)) for index, chunk in enumerate(chunks)),
            )
            conn.execute(
                "INSERT INTO records VALUES (?, ?, ?)", (digest, len(chunks), to_micros(T0))
            )
        return
    assert isinstance(store, DynamoDbStore)
    client: Any = store._client
    for index, chunk in enumerate(chunks):
        client.put_item(
            TableName=store._table,
            Item={
                "pk": {"S": f"RECORD#{digest}"},
                "sk": {"S": f"CHUNK#{index:06d}"},
                "text": {"S": chunk},
                "writtenAtUs": {"N": str(to_micros(T0))},
            },
        )
    client.put_item(
        TableName=store._table,
        Item={
            "pk": {"S": f"RECORD#{digest}"},
            "sk": {"S": "MANIFEST"},
            "chunkCount": {"N": str(len(chunks))},
            "writtenAtUs": {"N": str(to_micros(T0))},
        },
    )
