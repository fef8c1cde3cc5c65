"""The transparency log over HTTP: public, GET only, no token (c2sp.org/tlog-tiles).

`/log/checkpoint` (the newest signed checkpoint, text/plain), `/log/tile/<L>/<N>[.p/<W>]` and
`/log/tile/entries/<N>[.p/<W>]` (immutable, cached for a year), `/log/key` (the origin and
public key a verifier pins), `/log` (size, root and the newest self-check, for the
console) and `/log/entry/<index>` (one published entry as JSON, where a review's receipt
links). They are answered before the router, as the console's files are: tiles are bytes,
and a path that names no tile is a plain 404.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from forkhorse.api.routes.answers import JSON
from forkhorse.service.transparency import TransparencyLog
from forkhorse.tlog.verify import LogRefused

PREFIX = "/log"
IMMUTABLE = "public, max-age=31536000, immutable"
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Access-Control-Allow-Origin": "*"}


def _answer(status: int, body: bytes, media_type: str, cache: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": media_type, "Cache-Control": cache, **SECURITY_HEADERS},
        "body": base64.b64encode(body).decode("ascii"),
        "isBase64Encoded": True,
    }


def _json(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return _answer(status, json.dumps(body).encode(), JSON, "no-store")


NOT_FOUND = "No such log file."
NOT_PUBLISHED = "No signed checkpoint includes that entry yet."
# One index, one path: decimal without leading zeros, far below any log's size in digits.
_ENTRY = re.compile(r"entry/(0|[1-9][0-9]{0,17})")


def answer(log: TransparencyLog | None, method: str, path: str) -> dict[str, Any] | None:
    """The answer for a `/log` path; None for any other path (the router's)."""
    if path != PREFIX and not path.startswith(PREFIX + "/"):
        return None
    if method not in ("GET", "HEAD"):
        refused = _json(405, {"error": "Method not allowed: use GET."})
        refused["headers"]["Allow"] = "GET"
        return refused
    if log is None:
        return _json(404, {"error": "This deployment keeps no transparency log."})
    if path == PREFIX:
        return _json(200, log.status())
    return _file(log, path[len(PREFIX) + 1 :])


def _file(log: TransparencyLog, name: str) -> dict[str, Any]:
    """A file under `/log/`: the key, the checkpoint, an entry or a tile."""
    if name == "key":
        return _json(200, log.key_body())
    if name == "checkpoint":
        checkpoint = log.checkpoint()
        if checkpoint is None:
            return _json(404, {"error": "The log has published no checkpoint yet."})
        return _answer(200, checkpoint.encode(), "text/plain; charset=utf-8", "no-store")
    entry = _ENTRY.fullmatch(name)
    if entry is not None:
        return _entry(log, int(entry.group(1)))
    tile = log.tile(name)
    if tile is None:
        return _json(404, {"error": NOT_FOUND})
    return _answer(200, tile, "application/octet-stream", IMMUTABLE)


def _entry(log: TransparencyLog, index: int) -> dict[str, Any]:
    """One published entry as JSON; 409 when its bundle is not what the log published."""
    try:
        found = log.published_entry(index)
    except LogRefused as refused:
        return _json(409, {"error": f"The log's files are refused: {refused}"})
    if found is None:
        return _json(404, {"error": NOT_PUBLISHED})
    return _json(200, {**found, "bundle": f"{PREFIX}/{found['bundle']}"})
