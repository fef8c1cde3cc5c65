"""Local HTTP: WSGI requests become API Gateway HTTP API (v2) events for the same resolver.

`/git/...` goes to the git smart-HTTP WSGI app; everything else, the owner console's files
included, is the API, exactly as on AWS.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from forkhorse.api.app import ForkhorseApi
from forkhorse.domain.limits import API_INPUT
from forkhorse.domain.strict_json import too_large

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
GIT_PREFIX = "/git/"
_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


def wsgi_event(environ: dict[str, Any], body: bytes) -> dict[str, Any]:
    """The v2 event API Gateway would send for this request. Only the server sets the
    request context, so a client can never supply an authorizer's claims."""
    headers = _headers(environ)
    path = environ.get("PATH_INFO", "/") or "/"
    query = environ.get("QUERY_STRING", "")
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode("ascii"), True
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "queryStringParameters": _query(query) or None,
        "requestContext": {
            "accountId": "local",
            "apiId": "local",
            "domainName": headers.get("host", "localhost"),
            "domainPrefix": "local",
            "http": {
                "method": environ.get("REQUEST_METHOD", "GET"),
                "path": path,
                "protocol": environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
                "sourceIp": environ.get("REMOTE_ADDR", ""),
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text if body else None,
        "isBase64Encoded": encoded,
    }


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    headers = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    # The scheme is the server's, never the client's claim.
    headers["x-forwarded-proto"] = environ.get("wsgi.url_scheme", "http")
    return headers


def _query(query: str) -> dict[str, str]:
    return dict(parse_qsl(query, keep_blank_values=True))


def _read_body(environ: dict[str, Any], limit: int) -> bytes | None:
    """The request body, or None when it exceeds `limit`. A declared length past the limit
    is refused unread; without one (a chunked body the server terminates), at most one byte
    past the limit is read."""
    declared = _content_length(environ)
    if declared is not None and declared > limit:
        return None
    if declared is None and not environ.get("wsgi.input_terminated"):
        return b""  # no length and no end marker: reading could wait for ever
    body: bytes = environ["wsgi.input"].read(limit + 1 if declared is None else declared)
    return None if len(body) > limit else body


def _content_length(environ: dict[str, Any]) -> int | None:
    try:
        return max(int(environ.get("CONTENT_LENGTH") or ""), 0)
    except ValueError:
        return None


class LocalHttp:
    """The one WSGI application `forkhorse serve` runs."""

    def __init__(self, api: ForkhorseApi, git: WsgiApp | None = None) -> None:
        self.api = api
        self._git = git

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith(GIT_PREFIX) and self._git is not None:
            return self._git(environ, start_response)
        body = _read_body(environ, API_INPUT.body_bytes)
        if body is None:
            error = json.dumps({"error": str(too_large(API_INPUT.body_bytes))}).encode()
            return _send(start_response, 413, {"Content-Type": "application/json"}, error)
        response = self.api.handle(wsgi_event(environ, body))
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
        headers = {
            name: value
            for name, value in (response.get("headers") or {}).items()
            if name.lower() not in _HOP_HEADERS
        }
        return _send(start_response, int(response["statusCode"]), headers, data)


def _send(
    start_response: Callable[..., Any], status: int, headers: dict[str, str], data: bytes
) -> list[bytes]:
    phrase = HTTPStatus(status).phrase
    start_response(
        f"{status} {phrase}",
        [
            *headers.items(),
            ("Content-Length", str(len(data))),
            ("X-Content-Type-Options", "nosniff"),
        ],
    )
    return [data]


def access_logged(app: WsgiApp, write: Callable[[str], object]) -> WsgiApp:
    """`app`, writing one readable line per request once its body is sent: method, path,
    status, milliseconds and how the caller authenticated. Never a header's value or the
    query string, either of which may carry a token."""

    def logged(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.monotonic()
        status = ["-"]

        def recording(status_line: str, *rest: Any) -> Any:
            status[0] = status_line.split(" ", 1)[0]
            return start_response(status_line, *rest)

        def finished() -> None:
            elapsed = (time.monotonic() - started) * 1000
            method = environ.get("REQUEST_METHOD", "-")
            path = environ.get("PATH_INFO", "") or "/"
            write(f"{method} {path} {status[0]} {elapsed:.0f}ms {caller_kind(environ)}")

        return _then(app(environ, recording), finished)

    return logged


def caller_kind(environ: dict[str, Any]) -> str:
    """`bearer` (API tokens), `basic` (git clients) or `anonymous`: the scheme only."""
    scheme = str(environ.get("HTTP_AUTHORIZATION", "")).split(" ", 1)[0].lower()
    return scheme if scheme in ("bearer", "basic") else "anonymous"


def _then(body: Iterable[bytes], finished: Callable[[], None]) -> Iterator[bytes]:
    try:
        yield from body
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
        finished()
