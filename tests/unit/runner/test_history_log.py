"""The local execution history: one appended JSON line per event, read whole lines only."""

import json
from datetime import UTC, datetime
from pathlib import Path

from forkhorse.runner.local.history import HISTORY_SUFFIX, ExecutionHistory, read_history


class _Clock:
    def now(self) -> datetime:
        return datetime(2026, 12, 1, tzinfo=UTC)


def test_each_event_appends_one_line_and_never_rewrites_the_ones_before(tmp_path: Path) -> None:
    path = tmp_path / f"run{HISTORY_SUFFIX}"
    history = ExecutionHistory(path, _Clock())
    history.add("ExecutionStarted")
    first, inode = path.read_bytes(), path.stat().st_ino
    for index in range(200):
        history.entered("Task", "FullPoll", {"poll": index})
    # The same file, its earlier bytes untouched: a rewrite per event (quadratic in the
    # history's length) would replace the file or rewrite it from the start.
    assert path.stat().st_ino == inode
    assert path.read_bytes().startswith(first)
    assert len(path.read_bytes().splitlines()) == 201
    events = read_history(path)
    assert [event["id"] for event in events] == list(range(1, 202))
    assert events[-1]["previousEventId"] == 200


def test_a_line_still_being_written_is_left_for_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / f"run{HISTORY_SUFFIX}"
    ExecutionHistory(path, _Clock()).add("ExecutionStarted")
    with path.open("a") as stream:
        stream.write('{"id": 2, "type": "TaskStat')
    assert [event["id"] for event in read_history(path)] == [1]


def test_a_resumed_history_continues_its_numbering(tmp_path: Path) -> None:
    path = tmp_path / f"run{HISTORY_SUFFIX}"
    ExecutionHistory(path, _Clock()).add("ExecutionStarted")
    ExecutionHistory(path, _Clock()).add("ExecutionSucceeded")
    assert [(e["id"], e["previousEventId"]) for e in read_history(path)] == [(1, 0), (2, 1)]


def test_a_history_written_as_one_document_by_an_earlier_version_is_still_read(
    tmp_path: Path,
) -> None:
    earlier = [{"id": 1, "previousEventId": 0, "type": "ExecutionStarted"}]
    (tmp_path / "run.json").write_text(json.dumps({"events": earlier}))
    assert read_history(tmp_path / f"run{HISTORY_SUFFIX}") == earlier
