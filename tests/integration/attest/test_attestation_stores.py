"""Both attestation stores behave alike: an envelope is written once, keys only accumulate,
listed oldest first (SQLite in the Store's database file; DynamoDB in the single table)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import boto3
import pytest
from forkhorse.adapters.dynamodb.attestations import DynamoDbAttestations
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.adapters.sqlite.attestations import SqliteAttestations
from forkhorse.ports.attestations import AttestationStore, promotion_subject, receipt_subject

from tests.support.aws import create_table_from_template
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.store import T0


@pytest.fixture(params=["sqlite", "dynamodb"])
def attestations(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AttestationStore]:
    if request.param == "sqlite":
        store = SqliteStore(tmp_path)
        found = SqliteAttestations(store.path)
        yield found
        found.close()
        store.close()
        return
    request.getfixturevalue("aws_env")
    with atomic_mock_aws(request.getfixturevalue("monkeypatch")):
        dynamodb = boto3.client("dynamodb")
        yield DynamoDbAttestations(dynamodb, create_table_from_template(dynamodb))


def test_an_envelope_is_written_once(attestations: AttestationStore) -> None:
    subject = receipt_subject("e" * 64)
    assert attestations.get_envelope(subject) is None
    assert attestations.put_envelope(subject, '{"first": true}', T0)
    assert not attestations.put_envelope(subject, '{"second": true}', T0)
    assert attestations.get_envelope(subject) == '{"first": true}'
    assert attestations.get_envelope(promotion_subject("proj", "p1")) is None


def test_keys_accumulate_oldest_first(attestations: AttestationStore) -> None:
    assert attestations.list_keys() == []
    assert attestations.register_key("new", '{"k": 2}', T0 + timedelta(days=1))
    assert attestations.register_key("old", '{"k": 1}', T0)
    assert not attestations.register_key("old", '{"k": "replaced"}', T0 + timedelta(days=2))
    listed = attestations.list_keys()
    assert [(key.keyid, key.public_key, key.since) for key in listed] == [
        ("old", '{"k": 1}', T0),
        ("new", '{"k": 2}', T0 + timedelta(days=1)),
    ]
