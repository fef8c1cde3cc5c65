"""EventBridge events are typed at the edge: use cases get a validated detail, and an event
that is not what the rule promises is ignored with a log line, never half-read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forkhorse.wiring.events import execution_ended, push_detail

EVENTS = Path(__file__).resolve().parents[3] / "events"


def _sample(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


def test_the_sample_push_event_is_a_typed_push() -> None:
    push = push_detail(_sample("push.json"))
    assert push is not None
    assert (push.project, push.fork, push.ref) == ("demo", "agent-a-1", "refs/heads/main")
    assert push.new == "8f1d2c3b4a5968776655443322110ffeeddccbba"


@pytest.mark.parametrize(
    "change",
    [
        {"detail": {}},
        {"detail": {"project": "demo"}},
        {"detail": None},
        {"detail-type": "Scheduled Event"},
        {"detail": {"project": 7, "fork": "f", "ref": "r", "old": "o", "new": "n"}},
    ],
)
def test_a_malformed_push_event_is_ignored(
    change: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    event = _sample("push.json") | change
    assert push_detail(event) is None
    assert "ignored" in caplog.text


def test_a_deleted_or_created_ref_is_a_push_with_no_new_or_old_commit() -> None:
    """git's HTTP edge publishes a deletion with `new` null and a creation with `old` null."""
    event = _sample("push.json")
    deleted = push_detail(event | {"detail": event["detail"] | {"new": None}})
    created = push_detail(event | {"detail": event["detail"] | {"old": None}})
    assert deleted is not None
    assert deleted.new is None
    assert created is not None
    assert created.old is None


def test_a_status_change_is_typed_and_the_sweep_is_not_one() -> None:
    ended = execution_ended(_sample("sfn_status_change.json"))
    assert ended is not None
    assert ended.interrupted
    assert json.loads(ended.input)["run"]["reviewId"] == "review-1"
    assert execution_ended(_sample("recovery_sweep.json")) is None
