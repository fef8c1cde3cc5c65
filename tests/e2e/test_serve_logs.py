"""`forkhorse serve`'s output: one readable access line per request on stdout, never a
token, and the package's JSON log lines under `<home>/logs/`, rotated at their bound."""

from __future__ import annotations

import json
import logging
import re
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
    assert (LOCAL_LOG.file_bytes, LOCAL_LOG.backups) == (10 * MIB, 5)  # the README's bound
    small = LocalLogLimits(file_bytes=4 * KIB, backups=2)
    monkeypatch.setattr(observability, "LOCAL_LOG", small)
    package = logging.getLogger(observability.SERVICE)
    handlers, level = list(package.handlers), package.level
    logs = tmp_path / "logs"
    handler = observability.log_to_files(logs)
    try:
        for number in range(1_000):  # ~100 KiB of records, 25 times the file bound
            logging.getLogger("forkhorse.test").info("record %d %s", number, "x" * 40)
    finally:
        package.removeHandler(handler)
        handler.close()
        for kept in handlers:
            package.addHandler(kept)
        package.setLevel(level)

    files = sorted(path.name for path in logs.iterdir())
    assert files == ["forkhorse.jsonl", "forkhorse.jsonl.1", "forkhorse.jsonl.2"]
    assert all((logs / name).stat().st_size <= small.file_bytes for name in files)
    last = json.loads((logs / "forkhorse.jsonl").read_text().splitlines()[-1])
    assert last["message"].startswith("record 999 ")
    assert logs.stat().st_mode & 0o777 == 0o700
