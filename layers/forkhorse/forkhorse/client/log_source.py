"""Reading a transparency log's static files (c2sp.org/tlog-tiles): over HTTP from a
server's `/log/`, or from a directory they were copied to (`checkpoint`, `tile/...`). Both
are `tlog.verify.LogSource`s, so what verifies the log never trusts the server's proofs.

Every read is bounded by what the file can be: a checkpoint a few KiB, a hash tile 256
hashes (8 KiB), an entry bundle 256 entries of at most 4,096 bytes with their 2-byte length
prefixes. A larger file is refused (`LogRefused`), as is any path that is neither the
checkpoint nor a tile's. Over HTTP no token is sent (the log is public), no redirect is
followed, a 404 is an absent file and any other answer a `LogUnavailable`.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from forkhorse.client.errors import LogUnavailable, UsageError
from forkhorse.domain.log_entries import MAX_ENTRY_BYTES
from forkhorse.domain.tiles import (
    ENTRIES_LEVEL,
    HASH_SIZE,
    TILE_WIDTH,
    TileRefused,
    parse_tile_path,
)
from forkhorse.tlog.note import NoteRefused, key_id
from forkhorse.tlog.verify import CHECKPOINT_PATH, LogKey, LogRefused

CHECKPOINT_MAX_BYTES = 16 * 1024
KEY_MAX_BYTES = 16 * 1024
HASH_TILE_MAX_BYTES = TILE_WIDTH * HASH_SIZE
ENTRY_BUNDLE_MAX_BYTES = TILE_WIDTH * (2 + MAX_ENTRY_BYTES)
KEY_PATH = "key"
CONNECT_SECONDS = 10.0
READ_SECONDS = 30.0
CONNECT_RETRIES = 3


def max_bytes(path: str) -> int:
    """The most a log file at `path` can hold; LogRefused for a path that is no log file."""
    if path == CHECKPOINT_PATH:
        return CHECKPOINT_MAX_BYTES
    try:
        tile = parse_tile_path(path)
    except TileRefused as refused:
        raise LogRefused(f"not a file of the log: {refused}") from refused
    return ENTRY_BUNDLE_MAX_BYTES if tile.level == ENTRIES_LEVEL else HASH_TILE_MAX_BYTES


def _too_large(where: str, limit: int) -> LogRefused:
    return LogRefused(f"{where} is larger than a log file can be ({limit} bytes)")


class HttpLogSource:
    """The files under a log's URL, read with `http` (whose base URL the paths extend by
    `prefix`); the Authorization header of a shared client is removed from each request."""

    def __init__(self, http: httpx.Client, prefix: str = "") -> None:
        self._http = http
        self._prefix = prefix

    @classmethod
    def at(cls, log_url: str, transport: httpx.BaseTransport | None = None) -> HttpLogSource:
        """A source with its own HTTP client for the log at `log_url` (`https://h/log`)."""
        http = httpx.Client(
            base_url=log_url.rstrip("/") + "/",
            timeout=httpx.Timeout(READ_SECONDS, connect=CONNECT_SECONDS),
            transport=transport or httpx.HTTPTransport(retries=CONNECT_RETRIES),
            follow_redirects=False,
        )
        return cls(http)

    def close(self) -> None:
        self._http.close()

    def url(self, path: str) -> str:
        return str(self._http.build_request("GET", self._prefix + path).url)

    def read(self, path: str) -> bytes | None:
        return self._get(path, max_bytes(path))

    def key(self) -> LogKey | None:
        """The origin and public key the server names (`GET key`); None without a log."""
        data = self._get(KEY_PATH, KEY_MAX_BYTES)
        return None if data is None else parse_key_body(data, self.url(KEY_PATH))

    def _get(self, path: str, limit: int) -> bytes | None:
        request = self._http.build_request("GET", self._prefix + path)
        request.headers.pop("Authorization", None)  # the log is public: no token goes
        where = str(request.url)
        try:
            response = self._http.send(request, stream=True)
            try:
                return _body(response, where, limit)
            finally:
                response.close()
        except httpx.TransportError as failed:
            raise LogUnavailable(f"Cannot read {where}: {type(failed).__name__}.") from None


def _body(response: httpx.Response, where: str, limit: int) -> bytes | None:
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise LogUnavailable(
            f"{where} answered {response.status_code}; a log file answers 200 or 404."
        )
    declared = response.headers.get("Content-Length", "0")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(where, limit)
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise _too_large(where, limit)
        chunks.append(chunk)
    return b"".join(chunks)


class DirectoryLogSource:
    """The files copied to a directory laid out as the URLs are."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, path: str) -> bytes | None:
        limit = max_bytes(path)  # also refuses any path that is not a log file's
        target = self.root / path
        data = read_at_most(target, limit, "the log file")
        if data is not None and len(data) > limit:
            raise _too_large(str(target), limit)
        return data


def read_at_most(path: Path, limit: int, what: str) -> bytes | None:
    """The file's first `limit` + 1 bytes (one more shows it is too large); None if absent."""
    try:
        with path.open("rb") as handle:
            return handle.read(limit + 1)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as failed:
        raise UsageError(f"Cannot read {what} {path}: {failed.strerror}.") from None


def parse_key_body(data: bytes, where: str) -> LogKey | None:
    """The key a `/log/key` body names; None for `{}` (a deployment that keeps no log)."""
    try:
        body = json.loads(data)
    except ValueError:
        raise LogRefused(f"{where} is not JSON") from None
    if body == {}:
        return None
    if not isinstance(body, dict):
        raise LogRefused(f"{where} is not a JSON object")
    origin, pem = body.get("origin"), body.get("publicKey")
    if not isinstance(origin, str) or not isinstance(pem, str) or not origin:
        raise LogRefused(f"{where} names no origin and publicKey")
    key = LogKey(origin, pem)
    stated = body.get("keyId")
    if stated is not None and stated != key_hex(key):
        raise LogRefused(f"{where} states key ID {stated}, but its public key's is {key_hex(key)}")
    return key


def key_hex(key: LogKey) -> str:
    """The key's C2SP key ID in hex (what `/log/key` calls `keyId`)."""
    try:
        return key_id(key.public_pem).hex()
    except (NoteRefused, ValueError) as refused:
        raise LogRefused(f"the log's public key is not an ECDSA P-256 PEM: {refused}") from None
