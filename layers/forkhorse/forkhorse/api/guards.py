"""Checks every request passes before routing: same origin, JSON bodies (bounded and
well-formed), who is calling.

They run on the raw API Gateway v2 event, ahead of body validation, so an anonymous or
cross-origin request is refused the same way whatever its body holds.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from forkhorse.domain.limits import ApiInputLimits
from forkhorse.domain.strict_json import (
    NOT_UTF8,
    BodyTooLarge,
    InputRefused,
    parse_body,
    too_large,
)
from forkhorse.service.errors import BadRequest, Forbidden, ServiceError, Unauthorized
from forkhorse.service.identity import Caller

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PUBLIC_PATHS = frozenset({"/openapi.json", "/docs", "/keys"})  # /keys: public keys only
CROSS_ORIGIN = "Cross-origin requests are refused."
NOT_JSON = "Content-Type must be application/json."
NO_CREDENTIALS = "Authentication required: send Authorization: Bearer <token>."
BAD_CREDENTIALS = "The token is unknown or revoked."
# The Lambda authorizer's kind for a request it admitted without an identity.
ANONYMOUS = "anonymous"
NOT_BASE64 = "The body is marked base64 but is not valid base64."


class UnsupportedMediaType(ServiceError):
    status = 415


class PayloadTooLarge(ServiceError):
    status = 413


TokenAuthenticator = Callable[[str], Caller | None]


def headers_of(event: Mapping[str, Any]) -> dict[str, str]:
    return {name.lower(): value for name, value in (event.get("headers") or {}).items()}


def method_of(event: Mapping[str, Any]) -> str:
    return str(event.get("requestContext", {}).get("http", {}).get("method", "GET")).upper()


def origin_of(url: str) -> str:
    """The origin (scheme, host and any non-default port) browsers send for `url`."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}.get(scheme)
    port = "" if parts.port in (None, default_port) else f":{parts.port}"
    return f"{scheme}://{host}{port}"


def check_origin(event: Mapping[str, Any], public_origin: str) -> None:
    """A browser's Origin must be the configured public URL's, never whatever the request's
    Host says: DNS rebinding makes an attacker's page same-host with the service."""
    origin = headers_of(event).get("origin")
    if origin is not None and origin.lower() != public_origin:
        raise Forbidden(CROSS_ORIGIN)


def check_content_type(event: Mapping[str, Any]) -> None:
    if method_of(event) not in MUTATING_METHODS:
        return
    media_type = headers_of(event).get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(NOT_JSON)


def body_bytes(event: Mapping[str, Any], limit: int) -> bytes:
    """The raw request body, refused with a 413 past `limit` before it is decoded whole."""
    body = event.get("body") or ""
    if not isinstance(body, str):
        raise BadRequest(NOT_UTF8)
    encoded = bool(event.get("isBase64Encoded"))
    # Every character is at least one byte, and base64 grows bytes by a third.
    if len(body) > (limit * 4 // 3 + 4 if encoded else limit):
        raise PayloadTooLarge(str(too_large(limit)))
    raw = _decoded(body) if encoded else _encoded(body)
    if len(raw) > limit:
        raise PayloadTooLarge(str(too_large(limit)))
    return raw


def _decoded(body: str) -> bytes:
    try:
        return base64.b64decode(body, validate=True)
    except binascii.Error:
        raise BadRequest(NOT_BASE64) from None


def _encoded(body: str) -> bytes:
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in the event's body string
        raise BadRequest(NOT_UTF8) from None


def check_json_body(event: Mapping[str, Any], raw: bytes, limits: ApiInputLimits) -> None:
    """A mutating request's body, if any, must pass the strict bounded parser; the
    resolver then parses a body known to be small, shallow and well-formed."""
    if method_of(event) not in MUTATING_METHODS or not raw:
        return
    try:
        parse_body(raw, limits)
    except BodyTooLarge as refused:
        raise PayloadTooLarge(str(refused)) from None
    except InputRefused as refused:
        raise BadRequest(str(refused)) from None


def authorizer_caller(event: Mapping[str, Any]) -> Caller | None:
    """On AWS: the principal the Lambda authorizer resolved (None if it resolved none)."""
    authorizer = event.get("requestContext", {}).get("authorizer") or {}
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
    """The caller, or a 401 in the same words in both modes. Behind the authorizer, a
    token it could not resolve is not looked up again."""
    token = bearer_token(event)
    if trust_authorizer:
        caller = authorizer_caller(event)
    else:
        caller = None if token is None else tokens(token)
    if caller is not None:
        return caller
    raise Unauthorized(NO_CREDENTIALS if token is None else BAD_CREDENTIALS)
