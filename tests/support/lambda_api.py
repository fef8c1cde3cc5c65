"""The API functions on moto: the `aws` fixture (a template-built table, a bucket and the
functions' environment) and the sample events of events/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb import DynamoDbStore

from tests.support.aws import create_table_from_template
from tests.support.moto_atomic import atomic_mock_aws

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "forkhorse-api-tests"


def sample_event(name: str) -> dict[str, Any]:
    """A sample Lambda event from events/."""
    return json.loads((ROOT / "events" / name).read_text())  # type: ignore[no-any-return]


@pytest.fixture
def aws(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoDbStore]:
    with atomic_mock_aws(monkeypatch):
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        dynamodb = boto3.client("dynamodb")
        table = create_table_from_template(dynamodb)
        for name, value in {
            "TABLE_NAME": table,
            "BUCKET_NAME": BUCKET,
            "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:ReceiptRun",
            "PUBLIC_URL": "https://abc123.execute-api.us-east-1.amazonaws.com",
        }.items():
            monkeypatch.setenv(name, value)
        yield DynamoDbStore(dynamodb, table)
