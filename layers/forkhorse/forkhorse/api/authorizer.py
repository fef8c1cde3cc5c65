"""The HTTP API's one Lambda authorizer (payload 2.0, simple responses), on every
authenticated route.

It resolves two kinds of bearer token:
- Forkhorse tokens (owners' API tokens and agents' tokens), looked up by their SHA-256;
- owners' Cognito access tokens from the console's hosted-UI sign-in. Cognito's GetUser
  verifies the token; its issuer and client must then be this deployment's pool and console
  client, because GetUser accepts a valid token of any pool.

It never refuses: a request without a live token goes on as `anonymous`, and the API
answers it exactly as local mode does (401 with an `{"error"}` body), rather than API
Gateway's own `{"message"}` bodies. Who may do what (an agent on an owner route: 403) is
the service's decision, the same in both modes.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forkhorse.api.guards import ANONYMOUS, bearer_token
from forkhorse.ports.store import PrincipalStore
from forkhorse.service.identity import token_hash

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient

# Admitted with no identity: the API Lambda answers 401 in local mode's words.
UNAUTHENTICATED: dict[str, Any] = {"isAuthorized": True, "context": {"kind": ANONYMOUS}}


@dataclass(frozen=True)
class OwnerPool:
    """The Cognito pool and app client whose access tokens identify owners."""

    client: CognitoIdentityProviderClient
    issuer: str
    client_id: str


def _allow(principal_id: str, kind: str) -> dict[str, Any]:
    return {"isAuthorized": True, "context": {"principalId": principal_id, "kind": kind}}


def authorize(
    store: PrincipalStore, event: dict[str, Any], pool: OwnerPool | None = None
) -> dict[str, Any]:
    token = bearer_token(event)
    if token is None:
        return UNAUTHENTICATED
    principal = store.find_principal_by_token_hash(token_hash(token))
    if principal is not None and not principal.revoked:
        return _allow(principal.id, principal.kind)
    owner = None if pool is None else cognito_owner(pool, token)
    return UNAUTHENTICATED if owner is None else _allow(owner, "owner")


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
