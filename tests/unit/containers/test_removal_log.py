"""Reading podman's event log for removals: only what podman appended since the port started,
only complete lines, only from a file no one but its owner can write, in bounded memory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from forkhorse.adapters.containers import removal_log
from forkhorse.adapters.containers.removal_log import REMEMBERED_REMOVALS, RemovalLog

OWNER = os.getuid()
A, B = "a" * 64, "b" * 64


def event(container_id: str, status: str = "remove", kind: str = "container") -> bytes:
    line = {"ID": container_id, "Name": "n", "Status": status, "Type": kind, "Attributes": {}}
    return json.dumps(line).encode() + b"\n"


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "events.log"
    path.write_bytes(event("c" * 64, "start"))
    path.chmod(0o600)
    return path


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as log:
        log.write(data)


def test_a_removal_podman_logs_is_confirmed(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER)
    append(log_file, event(A, "died") + event(A))
    assert removals.removed(A)
    assert removals.removed(A), "asking again still finds it"


def test_other_events_and_other_containers_confirm_nothing(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER)
    append(log_file, event(A, "died") + event(A, "cleanup") + event(A, kind="image"))
    append(log_file, event(B))
    assert not removals.removed(A)
    assert removals.removed(B)


def test_history_from_before_the_port_started_is_not_read(log_file: Path) -> None:
    append(log_file, event(A))
    removals = RemovalLog(log_file, OWNER)
    assert not removals.removed(A)


def test_a_line_still_being_written_waits_for_its_end(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER)
    whole = event(A)
    append(log_file, whole[:-10])
    assert not removals.removed(A)
    append(log_file, whole[-10:])
    assert removals.removed(A)


def test_garbage_lines_are_skipped(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER)
    append(log_file, b'not json "remove"\n[1, "remove"]\n{"Status": "remove", "ID": 7}\n')
    append(log_file, event(A))
    assert removals.removed(A)


def test_a_rotated_log_is_read_from_its_start(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER)
    append(log_file, event(A))
    assert removals.removed(A)
    replacement = log_file.with_name("events.new")
    replacement.write_bytes(event(B))
    replacement.chmod(0o600)
    replacement.replace(log_file)  # a new file: a new inode, shorter than what was read
    assert removals.removed(B)


def test_a_truncated_log_is_read_from_its_start(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER)
    append(log_file, event("d" * 64, "start") * 4)
    assert not removals.removed(A)
    log_file.write_bytes(event(A))  # the same inode, shorter than what was read
    assert removals.removed(A)


def test_a_log_that_appears_later_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "events.log"
    removals = RemovalLog(path, OWNER)
    assert not removals.removed(A), "no log: nothing is confirmed, and nothing fails"
    path.write_bytes(event(A))
    path.chmod(0o600)
    assert removals.removed(A)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_log_others_could_write_is_not_believed(log_file: Path, mode: int) -> None:
    removals = RemovalLog(log_file, OWNER)
    append(log_file, event(A))
    log_file.chmod(mode)
    assert not removals.removed(A)
    log_file.chmod(0o600)
    assert removals.removed(A), "the same lines, once only the owner can write them"


def test_a_log_of_another_owner_is_not_believed(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER + 1)
    append(log_file, event(A))
    assert not removals.removed(A)


def test_a_directory_is_not_a_log(tmp_path: Path) -> None:
    removals = RemovalLog(tmp_path, OWNER)
    assert not removals.removed(A)


def test_one_read_is_bounded_and_a_longer_gap_is_skipped(
    log_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(removal_log, "SCAN_BYTES", 4 * len(event(A)))
    removals = RemovalLog(log_file, OWNER)
    append(log_file, event(A) + event("e" * 64, "start") * 10 + event(B))
    assert removals.removed(B), "the newest lines are read"
    assert not removals.removed(A), "the skipped gap is asked of podman instead"


def test_remembered_removals_are_bounded(log_file: Path) -> None:
    removals = RemovalLog(log_file, OWNER)
    ids = [f"{index:064x}" for index in range(REMEMBERED_REMOVALS + 100)]
    append(log_file, b"".join(event(container_id) for container_id in ids))
    assert removals.removed(ids[-1])
    assert not removals.removed(ids[0]), "the oldest were dropped"
    assert removals.removed(ids[100])
