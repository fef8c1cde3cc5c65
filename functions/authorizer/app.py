"""BearerTokenAuthorizerFunction: the HTTP API's one Lambda authorizer, for Forkhorse
tokens (by hash only) and owners' Cognito access tokens; see forkhorse.api.authorizer."""

from __future__ import annotations

from typing import Any

from forkhorse.api.authorizer import OwnerPool, authorize
from forkhorse.observability import lambda_handler
from forkhorse.ports.store import PrincipalStore
from forkhorse.wiring.aws import owner_pool, table_store

_wiring: tuple[PrincipalStore, OwnerPool | None] | None = None


@lambda_handler()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _wiring
    if _wiring is None:
        _wiring = (table_store(), owner_pool())
    store, pool = _wiring
    return authorize(store, event, pool)
