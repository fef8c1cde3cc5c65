"""One Store conformance suite, run against SQLite and against moto's DynamoDB."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.ports.store import Store

from tests.support.aws import create_table_from_template
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.store import Tamper


@pytest.fixture
def dynamodb_client(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with atomic_mock_aws(monkeypatch):
        yield boto3.client("dynamodb", region_name="us-east-1")


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Store, Tamper]:
    store = SqliteStore(tmp_path / "state")

    def tamper(digest: str, index: int, chunk: bytes) -> None:
        with store._write() as conn:
            conn.execute(
                "UPDATE record_chunks SET chunk = ? WHERE digest = ? AND idx = ?",
                (chunk, digest, index),
            )

    return store, tamper


def _dynamodb(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Store, Tamper]:
    client = request.getfixturevalue("dynamodb_client")
    table = create_table_from_template(client)
    store = DynamoDbStore(client, table)

    def tamper(digest: str, index: int, chunk: bytes) -> None:
        client.put_item(
            TableName=table,
            Item={
                "pk": {"S": f"RECORD#{digest}"},
                "sk": {"S": f"BYTES#{index:06d}"},
                "bytes": {"B": chunk},
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
