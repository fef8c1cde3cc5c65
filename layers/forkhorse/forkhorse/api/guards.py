"""Checks every request passes before its route runs: same origin, JSON bodies (bounded
and well-formed), who is calling.

`RequestGuards` runs them as the resolver's first middlewares, on the raw API Gateway v2
event and ahead of body validation, so an anonymous or cross-origin request is refused the
same way whatever its body holds. The caller goes into the routing context.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, BaseRouter
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

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
    kind = "unsupported"


class PayloadTooLarge(ServiceError):
    kind = "too-large"


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
    """A mutating request with a body must label it JSON. One without a body (a claim, a
    release, a revocation, as generated clients send them) needs no Content-Type: a
    browser's cross-origin request is refused by its Origin all the same."""
    if method_of(event) not in MUTATING_METHODS or not event.get("body"):
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


CALLER = "caller"  # the routing context's key for the authenticated caller
_RAW_BODY = "raw_body"

Middleware = Callable[[ApiGatewayResolver, NextMiddleware], Response[Any]]
RequestCheck = Callable[[ApiGatewayResolver], None]


def _raw_event(app: ApiGatewayResolver) -> Mapping[str, Any]:
    return app.current_event.raw_event


def _is_public(app: ApiGatewayResolver) -> bool:
    return str(_raw_event(app).get("rawPath", "/")) in PUBLIC_PATHS


def _as_middleware(check: RequestCheck) -> Middleware:
    def middleware(app: ApiGatewayResolver, next_middleware: NextMiddleware) -> Response[Any]:
        check(app)
        return next_middleware(app)

    middleware.__name__ = check.__name__
    return middleware


class RequestGuards:
    """Origin, media type and size first; the body is parsed only for a known caller."""

    def __init__(
        self,
        public_origin: str,
        tokens: TokenAuthenticator,
        trust_authorizer: bool,
        limits: ApiInputLimits,
    ) -> None:
        self._public_origin = public_origin
        self._tokens = tokens
        self._trust_authorizer = trust_authorizer
        self._limits = limits

    def middlewares(self) -> list[Middleware]:
        return [_as_middleware(check) for check in self._checks()]

    def check(self, app: ApiGatewayResolver) -> None:
        """Every guard at once, for a request no route matched (refused the same way)."""
        for check in self._checks():
            check(app)

    def _checks(self) -> tuple[RequestCheck, ...]:
        return (self.same_origin, self.json_media_type, self.authenticated, self.well_formed)

    def same_origin(self, app: ApiGatewayResolver) -> None:
        check_origin(_raw_event(app), self._public_origin)

    def json_media_type(self, app: ApiGatewayResolver) -> None:
        """A JSON content type on mutating requests with a body, and a body within the
        size limit."""
        if _is_public(app):
            return
        event = _raw_event(app)
        check_content_type(event)
        raw = body_bytes(event, self._limits.body_bytes)
        app.append_context(**{_RAW_BODY: raw})  # type: ignore[no-untyped-call]

    def authenticated(self, app: ApiGatewayResolver) -> None:
        if not _is_public(app):
            caller = authenticate(_raw_event(app), self._tokens, self._trust_authorizer)
            app.append_context(**{CALLER: caller})  # type: ignore[no-untyped-call]

    def well_formed(self, app: ApiGatewayResolver) -> None:
        if not _is_public(app):
            check_json_body(_raw_event(app), app.context[_RAW_BODY], self._limits)


def caller_of(app: BaseRouter) -> Caller:
    """The caller the guards authenticated for this request."""
    caller = app.context.get(CALLER)
    if not isinstance(caller, Caller):
        raise Unauthorized(NO_CREDENTIALS)
    return caller
