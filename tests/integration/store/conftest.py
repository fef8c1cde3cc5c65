"""One Store conformance suite, run against SQLite and against moto's DynamoDB."""

import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.ports.store import Store
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

from tests.support.aws import create_table_from_template
from tests.support.store import Tamper

_ATOMIC_OPERATIONS = (
    "put_item",
    "update_item",
    "delete_item",
    "transact_write_items",
    "batch_write_item",
    "get_item",
    "query",
)


@pytest.fixture
def atomic_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make moto apply each request atomically, as DynamoDB does.

    moto evaluates a condition and applies its write without a lock, so two threads
    can both pass the same condition; DynamoDB cannot. Serializing moto's requests
    keeps the race tests about our conditions: a read-check-write done in Python
    would still race under this lock.
    """
    lock = threading.RLock()
    for name in _ATOMIC_OPERATIONS:
        original = getattr(DynamoDBBackend, name)

        @functools.wraps(original)
        def serialized(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return __original(*args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, serialized)


@pytest.fixture
def dynamodb_client(aws_env: None, atomic_moto: None) -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Store, Tamper]:
    store = SqliteStore(tmp_path / "state")

    def tamper(digest: str, index: int, text: str) -> None:
        with store._write() as conn:
            conn.execute(
                "UPDATE record_chunks SET text = ? WHERE digest = ? AND idx = ?",
                (text, digest, index),
            )

    return store, tamper


def _dynamodb(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Store, Tamper]:
    client = request.getfixturevalue("dynamodb_client")
    table = create_table_from_template(client)
    store = DynamoDbStore(client, table)

    def tamper(digest: str, index: int, text: str) -> None:
        client.put_item(
            TableName=table,
            Item={
                "pk": {"S": f"RECORD#{digest}"},
                "sk": {"S": f"CHUNK#{index:06d}"},
                "text": {"S": text},
            },
        )

    return store, tamper


_BACKENDS = {"sqlite": _sqlite, "dynamodb": _dynamodb}


@pytest.fixture(params=sorted(_BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Tamper]]:
    store, tamper = _BACKENDS[request.param](tmp_path, request)
    yield store, tamper
    store.close()


@pytest.fixture
def store(backend: tuple[Store, Tamper]) -> Store:
    return backend[0]


@pytest.fixture
def tamper(backend: tuple[Store, Tamper]) -> Tamper:
    return backend[1]
