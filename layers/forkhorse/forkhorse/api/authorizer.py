"""The HTTP API Lambda authorizer (payload 2.0, simple responses).

It admits two kinds of bearer token:
- Forkhorse tokens (owners' API tokens and agents' tokens), looked up by their SHA-256;
- owners' Cognito access tokens, so that a console signed in through the hosted UI can
  also call the routes that owners share with agents. Cognito's GetUser verifies the
  token; its issuer and client must then be this deployment's pool and console client,
  because GetUser accepts a valid token of any pool.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forkhorse.ports.store import Store
from forkhorse.service.identity import token_hash

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient

DENY: dict[str, Any] = {"isAuthorized": False}


@dataclass(frozen=True)
class OwnerPool:
    """The Cognito pool and app client whose access tokens identify owners."""

    client: CognitoIdentityProviderClient
    issuer: str
    client_id: str


def bearer_token(event: dict[str, Any]) -> str | None:
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == "authorization":
            scheme, _, token = str(value).partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _allow(principal_id: str, kind: str) -> dict[str, Any]:
    return {"isAuthorized": True, "context": {"principalId": principal_id, "kind": kind}}


def authorize(store: Store, event: dict[str, Any], pool: OwnerPool | None = None) -> dict[str, Any]:
    token = bearer_token(event)
    if token is None:
        return DENY
    principal = store.find_principal_by_token_hash(token_hash(token))
    if principal is not None and not principal.revoked:
        return _allow(principal.id, principal.kind)
    owner = None if pool is None else cognito_owner(pool, token)
    return DENY if owner is None else _allow(owner, "owner")


def _claims(token: str) -> dict[str, Any] | None:
    """The payload of a JWT, unverified (GetUser has verified it by then)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (binascii.Error, ValueError):
        return None
    return claims if isinstance(claims, dict) else None


def cognito_owner(pool: OwnerPool, token: str) -> str | None:
    """The owner's `sub` for a live access token of this deployment's pool and client."""
    claims = _claims(token)
    if claims is None or claims.get("token_use") != "access":
        return None
    if claims.get("iss") != pool.issuer or claims.get("client_id") != pool.client_id:
        return None
    try:
        user = pool.client.get_user(AccessToken=token)
    except pool.client.exceptions.ClientError:
        return None
    attributes = {a["Name"]: a.get("Value") for a in user.get("UserAttributes", [])}
    sub = attributes.get("sub")
    return sub if isinstance(sub, str) and sub == claims.get("sub") else None
