"""The fixed summary wire shape and the schema-1 record."""

from datetime import UTC, datetime

import pytest
from forkhorse.domain.canonical import canonical_bytes
from forkhorse.domain.receipts import (
    CheckRecord,
    ReceiptRecord,
    ReceiptSummary,
    format_timestamp,
    running_summary,
    summary_json,
)
from pydantic import ValidationError

from tests.support.store import check, record

SUMMARY_KEYS = {"status", "trigger", "digest", "startedAt", "finishedAt", "durationMs", "checks"}


def test_a_running_summary_has_null_digest_and_no_checks() -> None:
    summary = running_summary("review-created", datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC))
    assert summary_json(summary) == {
        "status": "running",
        "trigger": "review-created",
        "digest": None,
        "startedAt": "2026-01-02T03:04:05.678Z",
        "finishedAt": None,
        "durationMs": None,
        "checks": [],
    }


def test_summary_checks_omit_absent_runtime_and_message_but_keep_null_duration() -> None:
    summary = record(checks=2).summary("d" * 64)
    wire = summary_json(summary)
    assert set(wire) == SUMMARY_KEYS
    assert wire["checks"][0] == {
        "name": "check-0",
        "tier": "quick",
        "runtime": "dynamic-worker",
        "message": "Check 0 passed.",
        "outcome": "passed",
        "durationMs": 12,
    }
    bare = summary.checks[1].model_copy(
        update={"runtime": None, "message": None, "duration_ms": None}
    )
    assert bare.model_dump() == {
        "name": "check-1",
        "tier": "full",
        "outcome": "passed",
        "durationMs": None,
    }
    assert ReceiptSummary.model_validate(wire) == summary


@pytest.mark.parametrize(
    "mutation",
    [
        {"logs": "x"},
        {"generation": "g1"},
        {"status": "green"},
        {"trigger": "push"},
        {"durationMs": "12"},
        {"startedAt": "yesterday"},
    ],
)
def test_the_summary_is_strict(mutation: dict[str, object]) -> None:
    wire = summary_json(record().summary(None))
    with pytest.raises(ValidationError):
        ReceiptSummary.model_validate({**wire, **mutation})


def test_record_serializes_with_schema_1_and_camel_case() -> None:
    data = record(checks=1).model_dump(mode="json")
    assert data["schema"] == 1
    assert {"reviewId", "startedAt", "finishedAt", "durationMs", "evidence", "platform"} <= set(
        data
    )
    assert data["checks"][0]["imageDigest"].startswith("module:sha256:")
    assert ReceiptRecord.model_validate_json(canonical_bytes(data)) == record(checks=1)


def test_legacy_records_without_runtime_are_only_full_container_checks() -> None:
    legacy = check(1).model_dump(mode="json")
    del legacy["runtime"]
    parsed = CheckRecord.model_validate(legacy)
    assert parsed.runtime is None
    assert "runtime" not in parsed.model_dump(mode="json"), "original serialization kept"
    quick = check(0).model_dump(mode="json")
    del quick["runtime"]
    with pytest.raises(ValidationError, match="legacy full/container"):
        CheckRecord.model_validate(quick)


def test_runtime_and_image_digest_must_fit_the_tier() -> None:
    with pytest.raises(ValidationError, match="quick check runs in dynamic-worker"):
        check(0).model_copy(update={"runtime": "container"}).model_validate(
            {**check(0).model_dump(), "runtime": "container"}
        )
    with pytest.raises(ValidationError, match="module:sha256"):
        CheckRecord.model_validate({**check(0).model_dump(), "imageDigest": "sha256:abc"})
    assert CheckRecord.model_validate({**check(0).model_dump(), "imageDigest": ""})


def test_a_record_holds_only_finished_checks() -> None:
    data = record().model_dump(mode="json")
    data["checks"][0]["outcome"] = "running"
    with pytest.raises(ValidationError, match="finished"):
        ReceiptRecord.model_validate(data)
    with pytest.raises(ValidationError):
        ReceiptRecord.model_validate({**record().model_dump(mode="json"), "status": "running"})


def test_timestamps_use_the_javascript_iso_form() -> None:
    assert (
        format_timestamp(datetime(2026, 10, 12, 20, 55, tzinfo=UTC)) == "2026-10-12T20:55:00.000Z"
    )
