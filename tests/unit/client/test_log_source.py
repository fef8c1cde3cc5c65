"""Reading a log's files (client/log_source.py): over HTTP without the token, no redirect
followed, 404 an absent file and any other answer a clear error; every file bounded by what
it can hold, and only the checkpoint's and tiles' paths read, over HTTP or from a directory."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from forkhorse.client.errors import LogUnavailable
from forkhorse.client.log_source import (
    CHECKPOINT_MAX_BYTES,
    ENTRY_BUNDLE_MAX_BYTES,
    HASH_TILE_MAX_BYTES,
    DirectoryLogSource,
    HttpLogSource,
    max_bytes,
    parse_key_body,
)
from forkhorse.tlog.verify import LogRefused, all_entries, fetch_checkpoint

from tests.support.served_log import ServedLog, key_body

LOG_URL = "https://service.test/log"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedLog]:
    log = ServedLog.create(tmp_path / "server")
    log.append(5)
    yield log
    log.close()


def _source(handle: httpx.MockTransport) -> HttpLogSource:
    return HttpLogSource.at(LOG_URL, transport=handle)


def test_the_bounds_are_what_each_file_can_hold() -> None:
    assert max_bytes("checkpoint") == CHECKPOINT_MAX_BYTES
    assert max_bytes("tile/0/000") == HASH_TILE_MAX_BYTES == 8192
    assert max_bytes("tile/3/x001/234.p/7") == HASH_TILE_MAX_BYTES
    assert max_bytes("tile/entries/000.p/5") == ENTRY_BUNDLE_MAX_BYTES == 256 * (2 + 4096)
    for path in ("key", "../secrets", "tile/0/1", "tile/entries/000.p/0", "/etc/passwd"):
        with pytest.raises(LogRefused, match="not a file of the log"):
            max_bytes(path)


def test_a_log_reads_whole_over_http_without_the_token(served: ServedLog) -> None:
    source = HttpLogSource.at(LOG_URL, transport=httpx.MockTransport(served.handle))
    checkpoint, _ = fetch_checkpoint(source, served.key)
    assert len(all_entries(source, checkpoint)) == 5
    assert source.key() == served.key
    assert {r.url.host for r in served.asked} == {"service.test"}
    assert all("authorization" not in r.headers for r in served.asked)


def test_a_shared_clients_token_is_not_sent_to_the_log(served: ServedLog) -> None:
    http = httpx.Client(
        base_url="https://service.test",
        headers={"Authorization": "Bearer the-token"},
        transport=httpx.MockTransport(served.handle),
    )
    source = HttpLogSource(http, "log/")
    assert source.read("checkpoint") == served.note().encode()
    assert served.asked[-1].url.path == "/log/checkpoint"
    assert "authorization" not in served.asked[-1].headers


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (httpx.Response(500, json={"error": "Boom."}), LogUnavailable, "answered 500"),
        (httpx.Response(302, headers={"Location": "https://elsewhere/"}), LogUnavailable, "302"),
        (httpx.Response(403), LogUnavailable, "answered 403"),
        (httpx.Response(200, content=b"x" * (CHECKPOINT_MAX_BYTES + 1)), LogRefused, "larger"),
    ],
)
def test_what_is_not_a_log_file_is_a_clear_error(
    answer: httpx.Response, error: type[Exception], message: str
) -> None:
    source = _source(httpx.MockTransport(lambda _: answer))
    with pytest.raises(error, match=message):
        source.read("checkpoint")


def test_a_file_larger_than_it_can_be_is_refused_while_it_streams() -> None:
    def endless(_: httpx.Request) -> httpx.Response:
        chunks = (b"\0" * 4096 for _ in range(1000))  # no Content-Length
        return httpx.Response(200, content=chunks)

    with pytest.raises(LogRefused, match="larger than a log file can be"):
        _source(httpx.MockTransport(endless)).read("tile/0/000")


def test_an_absent_file_is_none_and_an_unreachable_log_unavailable() -> None:
    assert _source(httpx.MockTransport(lambda _: httpx.Response(404))).read("checkpoint") is None

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(LogUnavailable, match=re.escape(f"Cannot read {LOG_URL}/checkpoint")):
        _source(httpx.MockTransport(down)).read("checkpoint")


def test_a_directory_of_copied_files_reads_as_the_log(served: ServedLog, tmp_path: Path) -> None:
    source = DirectoryLogSource(served.files.root)
    checkpoint, _ = fetch_checkpoint(source, served.key)
    assert checkpoint.size == 5
    assert source.read("tile/entries/001") is None
    big = tmp_path / "big"
    (big / "tile" / "0").mkdir(parents=True)
    (big / "tile" / "0" / "000").write_bytes(b"\0" * (HASH_TILE_MAX_BYTES + 1))
    with pytest.raises(LogRefused, match="larger"):
        DirectoryLogSource(big).read("tile/0/000")


def test_the_key_body_is_read_strictly(served: ServedLog) -> None:
    body = key_body(served.key)
    assert parse_key_body(json.dumps(body).encode(), "k") == served.key
    assert parse_key_body(b"{}", "k") is None
    with pytest.raises(LogRefused, match="states key ID"):
        parse_key_body(json.dumps(body | {"keyId": "00000000"}).encode(), "k")
    for broken in (b"[]", b"not json", json.dumps({"origin": "o"}).encode()):
        with pytest.raises(LogRefused):
            parse_key_body(broken, "k")
