"""Replay every reference vector (vendored in tests/conformance/flow-next), one test each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import PurePosixPath
from typing import Any

import pytest
from forkhorse.flow import green
from forkhorse.flow.criteria import parse_global_criteria, validate_criteria
from forkhorse.flow.currentness import select_current
from forkhorse.flow.envelope import check_findings_binding, validate_receipt
from forkhorse.flow.findings import validate_container
from forkhorse.flow.ids import finding_id, source_receipt_id
from forkhorse.flow.rules import RuleViolation

from tests.unit.flow.flow_factories import VECTORS, load_vectors

IDS = load_vectors("finding-id-vectors.json")
CONTAINERS = load_vectors("findings-container-validation-vectors.json")
CURRENTNESS = load_vectors("currentness-selection-vectors.json")
CRITERIA = load_vectors("criteria-vectors.json")
GREEN = load_vectors("green-receipt-vectors.json")


def _cases(cases: list[dict[str, Any]], key: str = "name") -> Any:
    return pytest.mark.parametrize("case", cases, ids=[str(case[key]) for case in cases])


def test_every_vector_file_is_replayed() -> None:
    replayed = {
        "finding-id-vectors.json",
        "findings-container-validation-vectors.json",
        "currentness-selection-vectors.json",
        "criteria-vectors.json",
        "green-receipt-vectors.json",
    }
    assert {path.name for path in VECTORS.glob("*.json")} == replayed


# --- ids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    IDS["finding_ids"],
    ids=[f"{c['firstSeenReceiptId']}#{c['ordinal']}" for c in IDS["finding_ids"]],
)
def test_finding_id(case: dict[str, Any]) -> None:
    assert finding_id(case["firstSeenReceiptId"], case["ordinal"]) == case["id"]


@_cases(IDS["source_receipt_ids"], key="sourceReceiptId")
def test_source_receipt_id(case: dict[str, Any]) -> None:
    assert source_receipt_id(**case["inputs"]) == case["sourceReceiptId"]


# --- containers and envelopes ------------------------------------------------------------------


@_cases(CONTAINERS["container_cases"])
def test_container_validation(case: dict[str, Any]) -> None:
    if case["expected_valid"]:
        validate_container(case["container"])
        return
    with pytest.raises(RuleViolation) as raised:
        validate_container(case["container"])
    assert raised.value.pointer.startswith("/")


@_cases(CONTAINERS["receipt_envelope_cases"])
def test_receipt_envelope(case: dict[str, Any]) -> None:
    assert validate_receipt(case["receipt"]).valid is case["expected_valid"]
    try:
        check_findings_binding(case["receipt"])
        bound = True
    except RuleViolation:
        bound = False
    assert bound is case["expected_valid"]


# --- currentness -------------------------------------------------------------------------------


@_cases(CURRENTNESS["scenarios"])
def test_currentness_selection(case: dict[str, Any]) -> None:
    selection = select_current(
        case["receipts"],
        head_sha=case["current_head_sha"],
        review_kind=case["filters"]["review_kind"],
        backend=case["filters"]["backend"],
    )
    expected = case["expected_selected_sourceReceiptId"]
    if expected is None:
        assert selection.tip is None
        assert selection.status in {"stale", "unsupported", "ambiguous", "absent"}
    else:
        assert selection.status == "current"
        assert selection.tip is not None
        assert selection.tip["sourceReceiptId"] == expected


# --- criteria ----------------------------------------------------------------------------------


@_cases(CRITERIA["parse_cases"])
def test_criteria_parse(case: dict[str, Any]) -> None:
    assert parse_global_criteria(case["review_text"]) == case["expected"]


@_cases(CRITERIA["receipt_validation_cases"])
def test_criteria_receipt_validation(case: dict[str, Any]) -> None:
    try:
        validate_criteria(case["receipt"])
        valid = True
    except RuleViolation:
        valid = False
    assert valid is case["expected_valid"]


# --- green receipts ----------------------------------------------------------------------------

# The reference generated the validity cases at this instant; only offsets from it matter.
GENERATED_AT = datetime(2026, 11, 30, 8, 5, 37, 786350, tzinfo=UTC)
# The reference compares with Python equality, so `true` and `1.0` pass as schema 1. Forkhorse
# keeps JSON integers strict (the vector notes a strict implementation would reject them).
STRICT_DEVIATIONS = {"schema-true": "bad schema", "schema-1.0": "bad schema"}


def _rebased(timestamp: str, now: datetime) -> str:
    parsed = datetime.fromisoformat(timestamp)
    aware = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    moved = now + (aware - GENERATED_AT)
    if parsed.tzinfo is None:
        return moved.replace(tzinfo=None).isoformat()
    text = moved.astimezone(parsed.tzinfo).isoformat()
    return text.replace("+00:00", "Z") if timestamp.endswith("Z") else text


@_cases(GREEN["validity_cases"])
def test_green_receipt_validity(case: dict[str, Any]) -> None:
    now = datetime.now(UTC)
    receipt = dict(case["receipt_relative_to_now"])
    receipt["timestamp"] = _rebased(receipt["timestamp"], now)
    check = green.check_receipt(
        receipt,
        head_sha="0123456789abcdef0123456789abcdef01234567",
        gate_id="unittest",
        command=case["command"],
        now=now,
    )
    if case["name"] in STRICT_DEVIATIONS:
        assert (check.honoured, check.reason) == (False, STRICT_DEVIATIONS[case["name"]])
    else:
        assert (check.honoured, check.reason) == (case["expected_valid"], case["expected_reason"])


@_cases(GREEN["command_fingerprints"], key="command_sha256")
def test_green_command_fingerprint(case: dict[str, Any]) -> None:
    assert green.command_sha256(case["command"]) == case["command_sha256"]


def test_green_receipt_path() -> None:
    example = GREEN["path_example"]
    path = green.receipt_path(example["head_sha"], example["gate_id"])
    assert path == PurePosixPath(example["path"])


@_cases(GREEN["gate_id_examples"], key="gate_id")
def test_green_gate_id(case: dict[str, Any]) -> None:
    assert green.is_valid_gate_id(case["gate_id"]) is case["valid"]


@_cases(GREEN["full_sha_examples"], key="sha")
def test_green_full_sha(case: dict[str, Any]) -> None:
    assert green.is_full_sha(case["sha"]) is case["accepted_for_ancestor_walk"]


@_cases(GREEN["ignore_set_examples"], key="path")
def test_green_receipt_only_state(case: dict[str, Any]) -> None:
    assert green.is_receipt_only_state(case["path"]) is case["ignored_as_receipt_only_state"]


def test_rebasing_keeps_the_future_case_in_the_future() -> None:
    now = datetime.now(UTC)
    future = datetime.fromisoformat(_rebased("2026-11-30T09:05:33.068866+00:00", now))
    assert timedelta(minutes=50) < future - now < timedelta(hours=1)
