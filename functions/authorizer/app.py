"""AuthorizerFunction: the HTTP API Lambda authorizer for bearer tokens (hashes only)."""

from __future__ import annotations

from typing import Any

from forkhorse.api.aws import authorize, aws_store
from forkhorse.ports.store import Store

_store: Store | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _store
    if _store is None:
        _store = aws_store()
    return authorize(_store, event)
