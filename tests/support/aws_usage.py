"""What one AWS flow costs in requests: every boto call counted by service and operation,
DynamoDB items and bytes written and read (in capacity units as AWS bills them), and Step
Functions state transitions per execution. The capacity model (docs/capacity.md) rests on
these counts."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.client import BaseClient

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
_WRITES = {"UpdateItem", "DeleteItem"}


def attribute_size(value: dict[str, Any]) -> int:
    """A DynamoDB attribute value's billed size, after AWS's documented rules."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        return len(inner.lstrip("-").replace(".", "")) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + item_size(inner)
    if kind == "L":
        return 3 + sum(attribute_size(element) + 1 for element in inner)
    return sum(len(str(element)) for element in inner)  # SS, NS, BS


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode("utf-8")) + attribute_size(v) for name, v in item.items())


@dataclass
class Usage:
    calls: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    read_units: float = 0.0
    items_written: int = 0
    bytes_written: int = 0
    updated_keys: list[dict[str, Any]] = field(default_factory=list)
    uncounted_threads: set[int] = field(default_factory=set)

    @contextmanager
    def uncounted(self) -> Iterator[None]:
        """This thread's calls in the block are the test's own polling, not the flow's."""
        self.uncounted_threads.add(threading.get_ident())
        try:
            yield
        finally:
            self.uncounted_threads.discard(threading.get_ident())

    def dynamodb_calls(self) -> int:
        return sum(n for name, n in self.calls.items() if name.startswith("dynamodb."))

    def _wrote(self, items: list[dict[str, Any]], transactional: bool) -> None:
        for item in items:
            size = item_size(item)
            self.items_written += 1
            self.bytes_written += size
            self.write_units += math.ceil(max(size, 1) / WRITE_UNIT_BYTES) * (
                2 if transactional else 1
            )

    def _read(self, items: list[dict[str, Any]], consistent: bool, transactional: bool) -> None:
        size = sum(item_size(item) for item in items)
        units = max(1, math.ceil(size / READ_UNIT_BYTES))
        self.read_units += units * (2 if transactional else 1 if consistent else 0.5)

    def bill_updates(self, table_items: list[dict[str, Any]]) -> None:
        """Bill each update or delete by the size of the item it left (its key when gone)."""
        by_key = {(i["pk"]["S"], i["sk"]["S"]): i for i in table_items if "sk" in i}
        for key in self.updated_keys:
            self._wrote([by_key.get((key["pk"]["S"], key["sk"]["S"]), key)], False)
        self.updated_keys.clear()

    def observe(self, operation: str, params: dict[str, Any], response: dict[str, Any]) -> None:
        """Bill one DynamoDB call: a write by the item it names, a read by what came back."""
        if operation == "PutItem":
            self._wrote([params["Item"]], False)
        elif operation in _WRITES:  # billed on the whole item's size: see `bill_updates`
            self.updated_keys.append(params["Key"])
        elif operation == "BatchWriteItem":
            for requests in params["RequestItems"].values():
                self._wrote(
                    [
                        r.get("PutRequest", {}).get("Item") or r["DeleteRequest"]["Key"]
                        for r in requests
                    ],
                    False,
                )
        elif operation == "TransactWriteItems":
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                if kind != "ConditionCheck":
                    self._wrote([body.get("Item") or body["Key"]], True)
        elif operation == "GetItem":
            self._read([response.get("Item", {})], bool(params.get("ConsistentRead")), False)
        elif operation in ("Query", "Scan"):
            self._read(response.get("Items", []), bool(params.get("ConsistentRead")), False)
        elif operation == "BatchGetItem":
            for table, items in response.get("Responses", {}).items():
                consistent = bool(params["RequestItems"][table].get("ConsistentRead"))
                self._read(items, consistent, False)
        elif operation == "TransactGetItems":
            self._read([r.get("Item", {}) for r in response.get("Responses", [])], True, True)


@contextmanager
def counting_aws_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Usage]:
    """Count every boto call made while the block runs (moto or not)."""
    usage = Usage()
    original = getattr(BaseClient, "_make_api_call")  # noqa: B009 (private to botocore)

    def counted(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        response = original(client, operation, params)
        if threading.get_ident() in usage.uncounted_threads:
            return response
        service = client.meta.service_model.service_name
        usage.calls[f"{service}.{operation}"] += 1
        if service == "dynamodb":
            usage.observe(operation, params, response)
        return response

    with monkeypatch.context() as patch:
        patch.setattr(BaseClient, "_make_api_call", counted)
        yield usage


def state_transitions(client: Any, machine_arn: str) -> list[int]:
    """Per execution of a machine: the states entered, which is what AWS bills as transitions."""
    counts = []
    for execution in client.list_executions(stateMachineArn=machine_arn)["executions"]:
        events = client.get_execution_history(
            executionArn=execution["executionArn"], maxResults=1000
        )["events"]
        counts.append(sum(1 for event in events if event["type"].endswith("StateEntered")))
    return counts
