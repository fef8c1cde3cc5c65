"""`forkhorse serve`'s output: one readable access line per request on stdout, never a
token, and the package's JSON log lines under `<home>/logs/`, rotated at their bound."""

from __future__ import annotations

import json
import logging
import re
import socket
import time
from pathlib import Path

import pytest
import requests
from forkhorse import observability
from forkhorse.domain.limits import KIB, LOCAL_LOG, MIB, LocalLogLimits

from tests.support.serve import ServeProcess, free_port

UNKNOWN_TOKEN = "fh_" + "s3cret" * 7
ACCESS_LINE_WAIT_SECONDS = 60


def test_a_request_prints_one_access_line_without_its_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    process = ServeProcess(home, free_port())
    process.start()
    try:
        response = requests.get(
            process.url + "/projects?probe=1",
            headers={"Authorization": f"Bearer {UNKNOWN_TOKEN}"},
            timeout=30,
        )
        assert response.status_code == 401
        # The line is printed once the response is sent: a loaded host may answer first.
        deadline = time.monotonic() + ACCESS_LINE_WAIT_SECONDS
        while "GET /projects" not in process.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        process.stop()

    output = process.log.read_text()
    access = [line for line in output.splitlines() if line.startswith("GET /projects")]
    assert len(access) == 1, output
    assert re.fullmatch(r"GET /projects 401 \d+ms bearer", access[0])
    assert UNKNOWN_TOKEN not in output
    journal = home / "logs" / observability.LOG_FILE
    text = journal.read_text()
    assert UNKNOWN_TOKEN not in text
    lines = [json.loads(line) for line in text.splitlines()]
    listening = next(line for line in lines if line["message"] == "listening")
    assert (listening["service"], listening["level"]) == ("forkhorse", "INFO")
    assert listening["url"] == process.url


def test_the_json_log_rotates_at_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (LOCAL_LOG.file_bytes, LOCAL_LOG.backups) == (10 * MIB, 5)  # docs/security.md's bound
    small = LocalLogLimits(file_bytes=4 * KIB, backups=2)
    monkeypatch.setattr(observability, "LOCAL_LOG", small)
    package = logging.getLogger(observability.SERVICE)
    handlers, level = list(package.handlers), package.level
    logs = tmp_path / "logs"
    added = observability.log_to_files(logs)
    try:
        for number in range(1_000):  # ~100 KiB of records, 25 times the file bound
            logging.getLogger("forkhorse.test").info("record %d %s", number, "x" * 40)
    finally:
        for handler in added:
            package.removeHandler(handler)
            handler.close()
        for kept in handlers:
            package.addHandler(kept)
        package.setLevel(level)

    files = sorted(path.name for path in logs.iterdir())
    assert files == ["forkhorse.jsonl", "forkhorse.jsonl.1", "forkhorse.jsonl.2", "metrics.jsonl"]
    assert all((logs / name).stat().st_size <= small.file_bytes for name in files)
    last = json.loads((logs / "forkhorse.jsonl").read_text().splitlines()[-1])
    assert last["message"].startswith("record 999 ")
    assert logs.stat().st_mode & 0o777 == 0o700


# Raw requests as an unauthenticated client can send them: control bytes in the path, raw
# and percent-encoded, in headers, and in a git route's project and service.
HOSTILE_REQUESTS = (
    b"GET /projects/\x1b]0;owned\x07\x1b[2J HTTP/1.1\r\nHost: x\r\n",
    b"GET /projects/%1b[31mred%07%7f%c2%9b HTTP/1.1\r\nHost: x\r\n",
    b"GET /git/p%1b[2J/info/refs?service=git-upload-pack%1b HTTP/1.1\r\nHost: x\r\n",
    b"GET /projects HTTP/1.1\r\nHost: x\r\nUser-Agent: \x1b[31m\x07\r\nX-Ref: a\x7fb\r\n",
    b"POST /git/p/git-receive-pack HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \x1b[2J\r\n",
)
# A raw C0 control but newline and tab, DEL, or a C1 control (as UTF-8 text or a raw byte).
RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def _send_raw(url: str, request: bytes) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(request + b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        while connection.recv(65536):
            pass


def test_no_log_line_carries_a_control_character_a_client_sent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    process = ServeProcess(home, free_port())
    process.start()
    try:
        for request in HOSTILE_REQUESTS:
            _send_raw(process.url, request)
        assert requests.get(process.url + "/favicon.ico", timeout=30).status_code == 200
        for _ in range(3):
            assert requests.get(process.url + "/projects", timeout=30).status_code == 401
        deadline = time.monotonic() + ACCESS_LINE_WAIT_SECONDS
        while process.log.read_text().count("GET /projects 401") < 3:
            assert time.monotonic() < deadline, process.log.read_text()
            time.sleep(0.05)
    finally:
        process.stop()

    output = process.log.read_bytes()  # the server's stdout and stderr
    assert RAW_CONTROL.search(output) is None, output
    text = output.decode("utf-8")
    assert "GET /projects/\\u001b]0;owned\\u0007\\u001b[2J 401" in text  # shown, escaped
    assert "GET /favicon.ico 200" in text
    assert [line for line in text.splitlines() if line.strip() in ("", "metric")] == []
    for journal in (home / "logs").iterdir():
        assert RAW_CONTROL.search(journal.read_bytes()) is None, journal
