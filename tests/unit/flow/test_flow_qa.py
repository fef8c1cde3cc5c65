"""QA receipts: scenario rows, R-ID coverage and carry refusals; criteria binding."""

from __future__ import annotations

from typing import Any

import pytest
from forkhorse.flow.criteria import bind_criteria, parse_global_criteria, validate_criteria
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.qa import CarryRefused, carry_scenario, derive_coverage
from forkhorse.flow.rules import RuleViolation


def live(scenario: str, outcome: str = "PASS", rids: list[str] | None = None) -> dict[str, Any]:
    evidence = [f"captures/{scenario}.png"]
    return {
        "id": scenario,
        "rids": rids or ["R1"],
        "outcome": outcome,
        "run": "live",
        "evidence": evidence,
    }


def qa_receipt(rows: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "qa_verdict", "mode": "host", "qa_outcome": "PASS"}
    body.update(spec_id="fn-7", branch="feature", head_sha="b" * 40, scenarios=rows)
    body.update(extra)
    return body


def coverage(**rids: str) -> dict[str, Any]:
    rows = [{"id": r_id, "coverage": value} for r_id, value in rids.items()]
    return {"covered": len(rows), "total": len(rows), "rids": rows}


def test_live_and_carried_rows_validate() -> None:
    prior = qa_receipt([live("s1"), live("s2", rids=["R2"])], head_sha="a" * 40)
    carried = carry_scenario(prior, "s2", spec_id="fn-7", branch="feature")
    body = qa_receipt([live("s1"), carried], rid_coverage=coverage(R1="live", R2="carried"))
    assert validate_receipt(body).valid
    assert carried["head_sha"] == "a" * 40


@pytest.mark.parametrize(
    ("row", "rule", "pointer"),
    [
        ({**live("s1"), "outcome": "pass"}, "qa.outcome", "/scenarios/0/outcome"),
        ({**live("s1"), "run": "replayed"}, "qa.run", "/scenarios/0/run"),
        ({**live("s1"), "extra": 1}, "qa.closed-keys", "/scenarios/0/extra"),
        ({"id": "s1", "run": "live"}, "qa.required", "/scenarios/0/evidence"),
        ({"id": "s1", "run": "carried", "outcome": "FAIL"}, "qa.outcome", "/scenarios/0/outcome"),
        ({**live("s1"), "rids": ["r1"]}, "qa.rids", "/scenarios/0/rids/0"),
    ],
)
def test_bad_rows_name_the_rule(row: dict[str, Any], rule: str, pointer: str) -> None:
    found = validate_receipt(qa_receipt([row])).violation
    assert found is not None
    assert (found.rule, found.pointer) == (rule, pointer)


def test_coverage_values_are_canonical_and_consistent() -> None:
    rows = [live("s1"), {"id": "s2", "run": "carried", "rids": ["R2"], "outcome": "PASS"}]
    for value in ("live", "subtracted", "no_live_scenario", "backend_cli"):
        assert validate_receipt(qa_receipt(rows, rid_coverage=coverage(R1=value))).valid
    assert not validate_receipt(qa_receipt(rows, rid_coverage=coverage(R1="carried"))).valid
    assert not validate_receipt(qa_receipt(rows, rid_coverage=coverage(R2="live"))).valid
    assert not validate_receipt(qa_receipt(rows, rid_coverage=coverage(R1="Live"))).valid


def test_the_reference_qa_receipt_is_valid() -> None:
    """As the reference's QA tests build it: mode `ralph`, coverage counted and listed."""
    body = {
        "type": "qa_verdict",
        "id": "fn-53-flow-nextqa-live-app-real-user-qa-pass",
        "mode": "ralph",
        "verdict": "NEEDS_WORK",
        "qa_outcome": "NEEDS_WORK",
        "head_sha": "0123456789abcdef0123456789abcdef01234567",
        "branch": "fn-53-flow-nextqa-live-app-real-user-qa-pass",
        "rid_coverage": {
            "covered": 2,
            "total": 3,
            "rids": [
                {"id": "R1", "coverage": "live"},
                {"id": "R2", "coverage": "subtracted"},
                {"id": "R3", "coverage": "no_live_scenario"},
            ],
        },
        "open_p0p1": [{"id": "S2-F1", "severity": "P0", "confidence": 100}],
        "timestamp": "2026-06-05T12:00:00Z",
    }
    assert validate_receipt(body).valid


@pytest.mark.parametrize(
    ("rid_coverage", "rule", "pointer"),
    [
        ({"R1": "live"}, "qa.coverage.closed-keys", "/rid_coverage/R1"),
        ({"covered": 3, "total": 2, "rids": []}, "qa.coverage-count", "/rid_coverage/covered"),
        ({"covered": True, "total": 2, "rids": []}, "qa.coverage-count", "/rid_coverage/covered"),
        (
            coverage(R1="live") | {"rids": [{"id": "R1", "coverage": "live"}] * 2},
            "qa.coverage-rid",
            "/rid_coverage/rids/1/id",
        ),
        (coverage(R1="sort-of"), "qa.coverage", "/rid_coverage/rids/0/coverage"),
    ],
)
def test_bad_coverage_names_the_rule(rid_coverage: object, rule: str, pointer: str) -> None:
    found = validate_receipt(qa_receipt([], rid_coverage=rid_coverage)).violation
    assert found is not None
    assert (found.rule, found.pointer) == (rule, pointer)


def test_the_backend_list_binds_only_implementation_reviews() -> None:
    impl = {"type": "impl_review", "mode": "ralph", "verdict": "SHIP"}
    found = validate_receipt(impl).violation
    assert found is not None
    assert found.rule == "receipt.mode"
    assert validate_receipt({**impl, "type": "plan_review"}).valid
    assert not validate_receipt({**impl, "type": "plan_review", "mode": ""}).valid


def test_criterion_is_carried_only_when_every_scenario_carried() -> None:
    rows = [live("s1", rids=["R1"]), {"id": "s2", "run": "carried", "rids": ["R1", "R2"]}]
    assert derive_coverage("R1", rows) == "live"
    assert derive_coverage("R2", rows) == "carried"
    assert derive_coverage("R3", rows) == "no_live_scenario"


@pytest.mark.parametrize(
    ("changes", "scenario", "reason"),
    [
        ({"spec_id": "fn-8"}, "s1", "another spec"),
        ({"branch": "main"}, "s1", "another branch"),
        ({}, "s2", "did not pass"),
        ({}, "s9", "absent"),
        ({"type": "impl_review"}, "s1", "not a qa_verdict"),
    ],
)
def test_carry_refusals(changes: dict[str, Any], scenario: str, reason: str) -> None:
    prior = qa_receipt([live("s1"), live("s2", outcome="BLOCKED")], **changes)
    with pytest.raises(CarryRefused, match=reason):
        carry_scenario(prior, scenario, spec_id="fn-7", branch="feature")


def test_a_carried_carry_keeps_the_head_where_it_ran() -> None:
    first = qa_receipt([live("s1")], head_sha="1" * 40)
    second = qa_receipt(
        [carry_scenario(first, "s1", spec_id="fn-7", branch="feature")], head_sha="2" * 40
    )
    third = carry_scenario(second, "s1", spec_id="fn-7", branch="feature")
    assert third["head_sha"] == "1" * 40


def test_scenarios_only_on_qa_receipts() -> None:
    body = {"type": "impl_review", "mode": "codex", "verdict": "SHIP", "scenarios": []}
    found = validate_receipt(body).violation
    assert found is not None
    assert found.rule == "qa.receipt-type"


def test_criteria_bind_only_to_the_configured_ids() -> None:
    parsed = parse_global_criteria("## Global criteria\nG1: met\nG2: n/a\n")
    assert bind_criteria(parsed, {"G1", "G2"}) == parsed
    assert bind_criteria(parsed, {"G1"}) is None
    assert bind_criteria(None, {"G1"}) is None


@pytest.mark.parametrize(
    "text", [None, 3, "", "## Global criteria\r\nG1: met\r\n", "x" * (1024 * 1024 + 1)]
)
def test_criteria_parse_degrades_never_raises(text: object) -> None:
    result = parse_global_criteria(text)
    assert result is None or result == [{"id": "G1", "status": "met"}]


def test_criteria_note_bound_in_stored_receipts() -> None:
    ok = {
        "type": "completion_review",
        "criteria": [{"id": "G1", "status": "violated", "note": "n" * 400}],
    }
    validate_criteria(ok)
    ok["criteria"][0]["note"] = "n" * 401
    with pytest.raises(RuleViolation) as raised:
        validate_criteria(ok)
    assert (raised.value.rule, raised.value.pointer) == ("criteria.note", "/criteria/0/note")
