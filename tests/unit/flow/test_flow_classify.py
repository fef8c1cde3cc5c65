"""Service-side classification: validity with rule and pointer, currentness, console grouping."""

from __future__ import annotations

import json

from forkhorse.flow.classify import classify_receipt

from tests.unit.flow.flow_factories import (
    HEAD,
    OTHER_HEAD,
    chain,
    container,
    item,
    receipt,
    root,
    successor,
)


def test_current_receipt_grouped_by_severity_and_introduction() -> None:
    findings = container(
        "r1",
        [
            item("r1", 1, severity="P1", confidence=50),
            item("r1", 2, severity="P1", confidence=100, classification="pre_existing"),
            item("r1", 3, severity="P3"),
            item("r1", 4, severity="P1", confidence=100),
        ],
    )
    result = classify_receipt(receipt(findings), HEAD)
    assert (result["valid"], result["findings"], result["tip"]) == (True, "current", "r1")
    assert (result["type"], result["verdict"], result["mode"]) == (
        "impl_review",
        "NEEDS_WORK",
        "codex",
    )
    groups = {g["severity"]: g for g in result["groups"]}
    assert [i["ordinal"] for i in groups["P1"]["introduced"]] == [4, 1]
    assert [i["ordinal"] for i in groups["P1"]["pre_existing"]] == [2]
    assert [i["ordinal"] for i in groups["P3"]["introduced"]] == [3]
    assert groups["P0"] == {"severity": "P0", "introduced": [], "pre_existing": []}
    json.dumps(result)  # ready for an API response


def test_invalid_receipt_reports_rule_and_pointer() -> None:
    findings = root("r1", 4)
    findings["items"][3]["anchor"] = {"path": "a.py", "side": "head", "startLine": 9, "endLine": 3}
    findings["items"][3]["anchor"].update(baseSha=findings["baseSha"], headSha=findings["headSha"])
    result = classify_receipt(receipt(findings), HEAD)
    assert (result["valid"], result["findings"]) == (False, "unsupported")
    assert (result["rule"], result["pointer"]) == (
        "anchor.range",
        "/findings/items/3/anchor/endLine",
    )


def test_invalid_receipt_without_findings_is_absent() -> None:
    result = classify_receipt({"type": "impl_review", "mode": "codex", "verdict": "LGTM"}, HEAD)
    assert (result["valid"], result["findings"], result["rule"]) == (
        False,
        "absent",
        "receipt.verdict",
    )


def test_legacy_receipt_is_valid_with_absent_findings() -> None:
    result = classify_receipt(receipt(None, verdict="SHIP"), HEAD)
    assert (result["valid"], result["findings"]) == (True, "absent")


def test_superseded_and_other_head_receipts_are_stale() -> None:
    gen1, gen2 = chain(2, 2)
    stored = [receipt(gen1), receipt(gen2)]
    assert classify_receipt(receipt(gen1), HEAD, stored)["findings"] == "stale"
    result = classify_receipt(receipt(gen2), HEAD, stored)  # the body may be in the lineage
    assert (result["findings"], result["tip"]) == ("current", "gen-2")
    assert classify_receipt(receipt(gen2), OTHER_HEAD, stored)["findings"] == "stale"


def test_ambiguous_and_unsupported_lineages() -> None:
    gen1 = root("g1", 1)
    left, right = successor(gen1, "left"), successor(gen1, "right")
    stored = [receipt(gen1), receipt(left), receipt(right)]
    assert classify_receipt(receipt(left), HEAD, stored)["findings"] == "ambiguous"
    dropped = successor(gen1, "dropped")
    dropped["items"] = []
    result = classify_receipt(receipt(dropped), HEAD, [receipt(gen1)])
    assert (result["valid"], result["findings"], result["rule"]) == (
        True,
        "unsupported",
        "lineage.incomplete-snapshot",
    )


def test_completion_criteria_are_passed_through() -> None:
    body = receipt(root("c1", 1, kind="completion"), type="completion_review")
    body["criteria"] = [{"id": "G1", "status": "met"}]
    result = classify_receipt(body, HEAD)
    assert result["criteria"] == [{"id": "G1", "status": "met"}]


def test_more_criteria_than_the_reference_allows_are_refused() -> None:
    body = receipt(root("c1", 1, kind="completion"), type="completion_review")
    body["criteria"] = [{"id": f"G{n}", "status": "met"} for n in range(1, 101)]
    assert classify_receipt(body, HEAD)["valid"] is True
    body["criteria"].append({"id": "G101", "status": "met"})
    result = classify_receipt(body, HEAD)
    assert result["valid"] is False
    assert "criteria.too-many" in json.dumps(result)


def test_non_objects_never_raise() -> None:
    for body in (None, [], "x", 1.5, {"findings": {"items": "x"}}):
        result = classify_receipt(body, HEAD, [None, 3])
        assert result["valid"] is False
