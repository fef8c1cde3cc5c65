"""The HTTP side of git's smart protocol: request bodies, pkt-lines and deferred responses.

A request body is read as it streams: decompressed when it is gzipped, and refused with
413 once more than the limit arrives or would be produced (so a small gzip body that
inflates past the limit is refused too), and with 400 when it is empty or badly gzipped.
Nothing here holds a whole body: each read returns at most what the handler asked for.

A response starts only with its first byte, so a refusal raised before that is still
answered whole (`git_error`) instead of as the end of a half-sent one.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from dulwich.protocol import SIDE_BAND_CHANNEL_FATAL, pkt_line

log = logging.getLogger(__name__)

_READ_STEP = 64 * 1024
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_PKT_HEADER = 4
_PKT_MAX = 65520
_PKT_LENGTH = re.compile(rb"[0-9a-fA-F]{4}")
_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    413: "Content Too Large",
    415: "Unsupported Media Type",
}


class Refused(Exception):
    """A request git's protocol cannot serve; answered with `status` and `message`.

    Deliberately not an OSError, so dulwich's handlers never swallow it into a status line.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def too_large(limit: int) -> Refused:
    return Refused(
        413,
        f"The request body is larger than {limit} bytes (decompressed), the git endpoint's "
        "limit; push fewer commits at a time.",
    )


BAD_GZIP = "The request body is not valid gzip, as its Content-Encoding says."
EMPTY_BODY = "The request body is empty; git sends at least one pkt-line."


class RequestBody:
    """The request body as the handlers read it: decompressed and bounded while it streams."""

    def __init__(self, raw: BinaryIO, length: int | None, gzipped: bool, limit: int) -> None:
        self._raw = raw
        self._remaining = length
        self._limit = limit
        self._produced = 0
        self._inflater = zlib.decompressobj(_GZIP_WBITS) if gzipped else None
        self._pending = b""
        self._raw_done = False

    @classmethod
    def from_environ(cls, environ: dict[str, Any], limit: int) -> RequestBody:
        """The body of a WSGI request; refused at once when its declared length is too large."""
        length = _content_length(environ)
        if length is not None and length > limit:
            raise too_large(limit)
        encoding = str(environ.get("HTTP_CONTENT_ENCODING", "")).strip().lower()
        if encoding not in ("", "identity", "gzip", "x-gzip"):
            raise Refused(415, f"Content-Encoding {encoding!r} is not supported; use gzip.")
        gzipped = encoding in ("gzip", "x-gzip")
        return cls(environ["wsgi.input"], length, gzipped, limit)

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (all when negative); fewer only at the end of the body."""
        wanted = self._limit + 1 if size < 0 else size
        chunks: list[bytes] = []
        got = 0
        while got < wanted:
            chunk = self._next(wanted - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
        self._produced += len(data)
        if self._produced > self._limit:
            raise too_large(self._limit)
        return data

    def require_content(self) -> None:
        """Refuse an empty body before a handler sees it."""
        first = self._next(1)
        if not first:
            raise Refused(400, EMPTY_BODY)
        self._pending = first + self._pending

    def _next(self, size: int) -> bytes:
        """At most `size` decoded bytes; empty only at the end."""
        if self._pending:
            data, self._pending = self._pending[:size], self._pending[size:]
            return data
        if self._inflater is None:
            return self._raw_read(size)
        return self._inflate(size)

    def _inflate(self, size: int) -> bytes:
        inflater = self._inflater
        assert inflater is not None
        while True:
            if inflater.eof:
                return b""
            source = inflater.unconsumed_tail or self._raw_read(_READ_STEP)
            if not source:
                raise Refused(400, BAD_GZIP)  # the stream ended inside the gzip member
            try:
                data = inflater.decompress(source, size)  # never more than asked for
            except zlib.error as corrupt:
                raise Refused(400, BAD_GZIP) from corrupt
            if data:
                return data

    def _raw_read(self, size: int) -> bytes:
        if self._raw_done:
            return b""
        if self._remaining is not None:
            size = min(size, self._remaining)
        data = self._raw.read(size) if size > 0 else b""
        if self._remaining is not None:
            self._remaining -= len(data)
        if not data:
            self._raw_done = True
        return data


def _content_length(environ: dict[str, Any]) -> int | None:
    value = str(environ.get("CONTENT_LENGTH") or "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise Refused(400, "The Content-Length header is not a number.")
    return int(value)


def read_pkt_lines(read: Callable[[int], bytes]) -> Iterator[bytes | None]:
    """Each pkt-line's payload (None for a flush-pkt) until the body ends; refuses bad framing."""
    while True:
        header = read(_PKT_HEADER)
        if not header:
            return
        size = _pkt_length(header)
        if size == 0:
            yield None
            continue
        payload = read(size - _PKT_HEADER)
        if len(payload) != size - _PKT_HEADER:
            raise Refused(400, "The request ends inside a pkt-line.")
        yield payload


def _pkt_length(header: bytes) -> int:
    if _PKT_LENGTH.fullmatch(header) is None:
        raise Refused(400, f"Bad pkt-line length {header!r}: git's framing was expected.")
    size = int(header, 16)
    if size != 0 and not _PKT_HEADER < size <= _PKT_MAX:
        raise Refused(400, f"Bad pkt-line length {header!r}: git's framing was expected.")
    return size


class DeferredResponse:
    """A 200 response begun by its first byte, so earlier refusals keep their own status."""

    def __init__(self, start_response: Callable[..., Any], content_type: str) -> None:
        self._start_response = start_response
        self._content_type = content_type
        self._write: Callable[[bytes], Any] | None = None

    @property
    def started(self) -> bool:
        return self._write is not None

    def write(self, data: bytes) -> int:
        if self._write is None:
            headers = [("Content-Type", self._content_type), *NO_CACHE]
            self._write = self._start_response("200 OK", headers)
        self._write(data)
        return len(data)

    def fatal(self, message: str) -> None:
        """End a started response with git's side-band error, which the client prints."""
        self.write(pkt_line(bytes([SIDE_BAND_CHANNEL_FATAL]) + message.encode("utf-8") + b"\n"))


NO_CACHE = [
    ("Cache-Control", "no-cache, max-age=0, must-revalidate"),
    ("Expires", "Fri, 01 Jan 1980 00:00:00 GMT"),
    ("Pragma", "no-cache"),
]


def plain(start_response: Callable[..., Any], status: int, message: str) -> list[bytes]:
    """A refusal: its status and one sentence, as text."""
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-cache")]
    if status == 401:
        headers.append(("WWW-Authenticate", 'Basic realm="Forkhorse", charset="UTF-8"'))
    start_response(f"{status} {_REASONS.get(status, 'Error')}", headers)
    return [message.encode("utf-8") + b"\n"]


MALFORMED = (400, 415)  # statuses of requests git itself never sends: they keep their 4xx


def git_error(
    start_response: Callable[..., Any], status: int, service: str, message: str
) -> list[bytes]:
    """A refusal of a service request (the POST), in words the git client prints.

    git's smart-HTTP client shows nothing of a 4xx answer to its POST but "RPC failed; HTTP
    <status>", so a refusal it can meet (a limit, busy, access) is answered 200 with git's
    own error: an `ERR` pkt-line for upload-pack (git prints `fatal: remote error: <why>`),
    the side-band error channel for receive-pack (git asks for side-band-64k on every push
    and prints `remote: <why>`). A request git never sends (bad framing, content type; the
    `MALFORMED` statuses) keeps its 4xx status, with the `ERR` line as its body."""
    log.info("refused a %s request: %s", service, message)
    malformed = status in MALFORMED
    shown = 200 if not malformed else status
    start_response(
        f"{shown} {'OK' if shown == 200 else _REASONS.get(shown, 'Error')}",
        [("Content-Type", f"application/x-{service}-result"), *NO_CACHE],
    )
    line = message.encode("utf-8") + b"\n"
    if malformed or service != "git-receive-pack":
        return [pkt_line(b"ERR " + line)]
    return [pkt_line(bytes([SIDE_BAND_CHANNEL_FATAL]) + line) + pkt_line(None)]
