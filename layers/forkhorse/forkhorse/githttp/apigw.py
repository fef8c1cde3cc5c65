"""Run a WSGI app for one API Gateway HTTP API (payload v2) event, within Lambda's limits.

Lambda accepts at most 6 MB of synchronous request and response payload; bodies travel
base64-encoded (4/3 larger), so the decoded body limits below keep both under it.
"""

from __future__ import annotations

import base64
import io
import sys
from collections.abc import Callable, Iterable
from typing import Any

from forkhorse.domain.limits import GIT
from forkhorse.githttp.wire import git_error

# The request-size limit in docs/api-and-clients.md (git over HTTP): a larger push must be
# split.
MAX_REQUEST_BYTES = GIT.lambda_request_bytes
MAX_RESPONSE_BYTES = GIT.lambda_request_bytes

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

TOO_LARGE_REQUEST = (
    f"The request is larger than {MAX_REQUEST_BYTES} bytes, the git endpoint's limit; "
    "push fewer commits at a time."
)
TOO_LARGE_RESPONSE = (
    f"The response is larger than {MAX_RESPONSE_BYTES} bytes, the git endpoint's limit; "
    "fetch fewer commits at a time (for example with --depth)."
)


def invoke_wsgi(app: WsgiApp, event: dict[str, Any]) -> dict[str, Any]:
    body = _request_body(event)
    if len(body) > MAX_REQUEST_BYTES:
        return _refusal(event, TOO_LARGE_REQUEST)
    captured: dict[str, Any] = {}
    output = _BoundedOutput(MAX_RESPONSE_BYTES)  # dulwich writes through write() and yields

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = headers
        return output.append

    try:
        chunks = app(wsgi_environ(event, body), start_response)
        try:
            for chunk in chunks:
                output.append(chunk)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
    except _ResponseTooLarge:
        return _refusal(event, TOO_LARGE_RESPONSE)
    payload = b"".join(output.chunks)
    return {
        "statusCode": captured["status"],
        "headers": _joined_headers(captured["headers"]),
        "body": base64.b64encode(payload).decode("ascii"),
        "isBase64Encoded": True,
    }


class _ResponseTooLarge(Exception):
    """Raised from inside the app's writes, so a large clone stops where the limit is."""


class _BoundedOutput:
    """The response as it is produced; never holds more than the limit."""

    def __init__(self, limit: int) -> None:
        self.chunks: list[bytes] = []
        self._size = 0
        self._limit = limit

    def append(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self._limit:
            raise _ResponseTooLarge()
        self.chunks.append(bytes(data))


def wsgi_environ(event: dict[str, Any], body: bytes) -> dict[str, Any]:
    http = event.get("requestContext", {}).get("http", {})
    headers = {name.lower(): value for name, value in (event.get("headers") or {}).items()}
    environ: dict[str, Any] = {
        "REQUEST_METHOD": http.get("method", "GET"),
        "PATH_INFO": event.get("rawPath", "/"),
        "QUERY_STRING": event.get("rawQueryString", ""),
        "SCRIPT_NAME": "",
        "SERVER_NAME": headers.get("host", "lambda"),
        "SERVER_PORT": "443",
        "SERVER_PROTOCOL": http.get("protocol", "HTTP/1.1"),
        "REMOTE_ADDR": http.get("sourceIp", ""),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": headers.get("content-type", ""),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "https",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in headers.items():
        if name not in ("content-type", "content-length", "transfer-encoding"):
            environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ


def _request_body(event: dict[str, Any]) -> bytes:
    raw = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(raw)
    return raw.encode("utf-8")


def _joined_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for name, value in headers:
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    return joined


def _refusal(event: dict[str, Any], message: str) -> dict[str, Any]:
    """A limit refused: git's own error for a service request (its POST), which git prints
    (`wire.git_error`), and a 413 with the sentence otherwise (git prints a refused GET's
    text too)."""
    path = str(event.get("rawPath", ""))
    service = path.rsplit("/", 1)[-1]
    method = event.get("requestContext", {}).get("http", {}).get("method")
    if method != "POST" or service not in ("git-upload-pack", "git-receive-pack"):
        return _text_response(413, message)
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        captured["status"], captured["headers"] = int(status.split(" ", 1)[0]), headers

    payload = b"".join(git_error(start_response, 413, service, message))
    return {
        "statusCode": captured["status"],
        "headers": _joined_headers(captured["headers"]),
        "body": base64.b64encode(payload).decode("ascii"),
        "isBase64Encoded": True,
    }


def _text_response(status: int, message: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "text/plain; charset=utf-8"},
        "body": message + "\n",
        "isBase64Encoded": False,
    }
