"""moto's DynamoDB made atomic per request, as DynamoDB is; every test enters moto through
`atomic_mock_aws`, so no fixture can race moto's own unlocked writes.

Apart from aws.py because the tools venv, which tests the template, has no moto.
"""

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

_ATOMIC_OPERATIONS = (
    "put_item",
    "update_item",
    "delete_item",
    "transact_write_items",
    "batch_write_item",
    "get_item",
    "batch_get_item",
    "query",
    "scan",
)


def make_moto_dynamodb_atomic(monkeypatch: pytest.MonkeyPatch) -> None:
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


@contextmanager
def atomic_mock_aws(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, Any] | None = None
) -> Iterator[None]:
    """`mock_aws` with DynamoDB's per-request atomicity: the only way tests enter moto."""
    make_moto_dynamodb_atomic(monkeypatch)
    with mock_aws(config=config):  # type: ignore[arg-type]
        yield
