"""Checks every request passes before routing: same origin, JSON bodies, who is calling.

They run on the raw API Gateway v2 event, ahead of body validation, so an anonymous or
cross-origin request is refused the same way whatever its body holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from forkhorse.service.errors import Forbidden, ServiceError, Unauthorized
from forkhorse.service.identity import Caller

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PUBLIC_PATHS = frozenset({"/openapi.json", "/docs"})
CROSS_ORIGIN = "Cross-origin requests are refused."
NOT_JSON = "Content-Type must be application/json."
NO_CREDENTIALS = "Authentication required: send Authorization: Bearer <token>."
BAD_CREDENTIALS = "The token is unknown or revoked."


class UnsupportedMediaType(ServiceError):
    status = 415


TokenAuthenticator = Callable[[str], Caller | None]


def headers_of(event: Mapping[str, Any]) -> dict[str, str]:
    return {name.lower(): value for name, value in (event.get("headers") or {}).items()}


def method_of(event: Mapping[str, Any]) -> str:
    return str(event.get("requestContext", {}).get("http", {}).get("method", "GET")).upper()


def own_origin(event: Mapping[str, Any]) -> str:
    """The service's own origin: the host the request was sent to, on its scheme."""
    headers = headers_of(event)
    host = event.get("requestContext", {}).get("domainName") or headers.get("host", "")
    scheme = headers.get("x-forwarded-proto", "https")
    return f"{scheme}://{host}"


def check_origin(event: Mapping[str, Any]) -> None:
    origin = headers_of(event).get("origin")
    if origin is not None and origin != own_origin(event):
        raise Forbidden(CROSS_ORIGIN)


def check_content_type(event: Mapping[str, Any]) -> None:
    if method_of(event) not in MUTATING_METHODS:
        return
    media_type = headers_of(event).get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(NOT_JSON)


def authorizer_caller(event: Mapping[str, Any]) -> Caller | None:
    """On AWS: an owner from the Cognito JWT authorizer's claims, or the principal the
    Lambda authorizer resolved from an agent's token hash."""
    authorizer = event.get("requestContext", {}).get("authorizer") or {}
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    if isinstance(claims.get("sub"), str) and claims["sub"]:
        return Caller(id=claims["sub"], kind="owner")
    resolved = authorizer.get("lambda") or {}
    kind = resolved.get("kind")
    if isinstance(resolved.get("principalId"), str) and kind in ("owner", "agent"):
        return Caller(id=resolved["principalId"], kind=kind)
    return None


def bearer_token(event: Mapping[str, Any]) -> str | None:
    scheme, _, token = headers_of(event).get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def authenticate(
    event: Mapping[str, Any], tokens: TokenAuthenticator, trust_authorizer: bool
) -> Caller:
    if trust_authorizer:
        caller = authorizer_caller(event)
        if caller is not None:
            return caller
    token = bearer_token(event)
    if token is None:
        raise Unauthorized(NO_CREDENTIALS)
    caller = tokens(token)
    if caller is None:
        raise Unauthorized(BAD_CREDENTIALS)
    return caller
