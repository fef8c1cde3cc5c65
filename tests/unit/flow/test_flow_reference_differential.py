"""Replay the differential vectors the reference Flow-Next answered on generated inputs
(`scripts/conformance/generate_flow_vectors.py`, files in tests/conformance/flow-next/generated).

Forkhorse must answer as the reference did, except where a divergence listed in
tests/conformance/DIVERGENCES.md applies; each divergence is a named predicate over the vector,
it only ever makes Forkhorse refuse what the reference accepted, and
`test_every_listed_divergence_is_exercised` keeps the list and the vectors honest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from forkhorse.flow import green
from forkhorse.flow.currentness import select_current
from forkhorse.flow.envelope import check_findings_binding
from forkhorse.flow.findings import validate_container
from forkhorse.flow.ids import finding_id, source_receipt_id
from forkhorse.flow.rules import RuleViolation

from tests.unit.flow.flow_factories import VECTORS

GENERATED = VECTORS / "generated"
DIVERGENCES = VECTORS.parent / "DIVERGENCES.md"


def _load(name: str) -> dict[str, Any]:
    return json.loads((GENERATED / name).read_text(encoding="utf-8"))


VALIDATION = _load("container-validation.json")
CURRENTNESS = _load("currentness.json")
IDS = _load("finding-ids.json")
GREEN = _load("green-receipts.json")
FILES = {
    "container-validation.json": VALIDATION,
    "currentness.json": CURRENTNESS,
    "finding-ids.json": IDS,
    "green-receipts.json": GREEN,
}


def _cases(vectors: dict[str, Any]) -> Any:
    cases = vectors["cases"]
    return pytest.mark.parametrize("case", cases, ids=[case["name"] for case in cases])


def _raised(reference_answer: object) -> bool:
    return isinstance(reference_answer, dict) and "raised" in reference_answer


# --- divergences: predicates over a vector, named as in DIVERGENCES.md ------------------------

OPTIONAL_KEYS = {
    "container": ("supersedesReceiptId",),
    "item": ("priorFindingId", "anchor", "suggestion"),
    "anchor": ("endLine", "originalPath", "blobOid"),
}
_ASCII_R_ID = re.compile(r"R[0-9]+")
_ANY_DIGIT_R_ID = re.compile(r"R\d+")


def _items(container: object) -> Iterator[Mapping[str, Any]]:
    items = container.get("items") if isinstance(container, Mapping) else None
    yield from (i for i in items if isinstance(i, Mapping)) if isinstance(items, list) else ()


def _anchors(container: object) -> Iterator[Mapping[str, Any]]:
    for item in _items(container):
        if isinstance(item.get("anchor"), Mapping):
            yield item["anchor"]


def null_optional(case: dict[str, Any]) -> bool:
    container = case["container"]
    objects = [("container", container)]
    objects += [("item", i) for i in _items(container)] + [
        ("anchor", a) for a in _anchors(container)
    ]
    return any(
        isinstance(obj, Mapping) and key in obj and obj[key] is None
        for level, obj in objects
        for key in OPTIONAL_KEYS[level]
    )


def non_ascii_r_id(case: dict[str, Any]) -> bool:
    return any(
        isinstance(r_id, str)
        and _ANY_DIGIT_R_ID.fullmatch(r_id)
        and not _ASCII_R_ID.fullmatch(r_id)
        for item in _items(case["container"])
        if isinstance(item.get("rIds"), list)
        for r_id in item["rIds"]
    )


def _anchor_paths(case: dict[str, Any]) -> Iterator[str]:
    for anchor in _anchors(case["container"]):
        yield from (anchor[k] for k in ("path", "originalPath") if isinstance(anchor.get(k), str))


def backslash_in_path(case: dict[str, Any]) -> bool:
    return any("\\" in path for path in _anchor_paths(case))


def nul_in_path(case: dict[str, Any]) -> bool:
    return any("\0" in path for path in _anchor_paths(case))


def reference_crashed(case: dict[str, Any]) -> bool:
    return _raised(case["reference_container_valid"]) or _raised(case["reference_receipt_valid"])


def prior_names_a_sibling(case: dict[str, Any]) -> bool:
    """On the reference's selected chain, a priorFindingId names an item of its own generation."""
    by_source = {c["sourceReceiptId"]: c for c in case["containers"] if c is not None}
    cursor, older = by_source.get(case["reference_tip"]), set[str]()
    chain = []
    while cursor is not None:
        chain.append(cursor)
        cursor = by_source.get(cursor.get("supersedesReceiptId"))
    for generation in reversed(chain):
        for item in generation["items"]:
            if "priorFindingId" in item and item["priorFindingId"] not in older:
                return True
        older |= {item["id"] for item in generation["items"]}
    return False


def schema_not_an_integer(case: dict[str, Any]) -> bool:
    schema = case["receipt"].get("schema")
    return isinstance(schema, (bool, float)) and schema == 1


def body_names_another_gate(case: dict[str, Any]) -> bool:
    return (
        case["reference"] == [True, green.HONOURED]
        and case["receipt"].get("gate_id") != GREEN["gate_id"]
    )


Divergence = Callable[[dict[str, Any]], bool]
VALIDATION_DIVERGENCES: dict[str, Divergence] = {
    "null-optional-field": null_optional,
    "non-ascii-r-id-digits": non_ascii_r_id,
    "backslash-in-anchor-path": backslash_in_path,
    "nul-in-anchor-path": nul_in_path,
    "reference-crash": reference_crashed,
}
CURRENTNESS_DIVERGENCES: dict[str, Divergence] = {"prior-names-a-sibling": prior_names_a_sibling}
GREEN_DIVERGENCES: dict[str, Divergence] = {
    "schema-not-an-integer": schema_not_an_integer,
    "receipt-body-names-another-gate": body_names_another_gate,
}
ALL_DIVERGENCES = {
    "container-validation.json": VALIDATION_DIVERGENCES,
    "currentness.json": CURRENTNESS_DIVERGENCES,
    "green-receipts.json": GREEN_DIVERGENCES,
}


def _applying(divergences: dict[str, Divergence], case: dict[str, Any]) -> list[str]:
    return [name for name, applies in divergences.items() if applies(case)]


# --- replay ------------------------------------------------------------------------------------


def _accepts(check: Callable[[], object]) -> bool:
    try:
        check()
    except RuleViolation:
        return False
    return True


@_cases(VALIDATION)
def test_container_validation_matches_the_reference(case: dict[str, Any]) -> None:
    receipt = {**case["envelope"], "findings": case["container"]}
    ours = (
        _accepts(lambda: validate_container(case["container"])),
        _accepts(lambda: check_findings_binding(receipt)),
    )
    reference = (case["reference_container_valid"], case["reference_receipt_valid"])
    if _applying(VALIDATION_DIVERGENCES, case):
        assert ours == (False, False)  # Forkhorse is the stricter side, never the looser
    else:
        assert ours == reference


def _receipt(container: dict[str, Any] | None) -> dict[str, Any]:
    envelope = {"type": "impl_review", "mode": "codex", "verdict": "NEEDS_WORK"}
    if container is None:
        return envelope
    return {**envelope, "mode": container["backend"], "findings": container}


@_cases(CURRENTNESS)
def test_currentness_matches_the_reference(case: dict[str, Any]) -> None:
    selection = select_current(
        [_receipt(c) for c in case["containers"]],
        head_sha=case["head"],
        review_kind="implementation",
        backend="codex",
    )
    ours = selection.tip["sourceReceiptId"] if selection.tip is not None else None
    assert (ours is not None) is selection.current
    if _applying(CURRENTNESS_DIVERGENCES, case):
        assert ours is None, selection
    else:
        assert ours == case["reference_tip"], selection


@_cases(IDS)
def test_ids_match_the_reference(case: dict[str, Any]) -> None:
    assert finding_id(case["firstSeenReceiptId"], case["ordinal"]) == case["reference_id"]
    assert source_receipt_id(**case["source"]) == case["reference_sourceReceiptId"]


GREEN_NOW = datetime.fromisoformat(GREEN["now"])


@_cases(GREEN)
def test_green_decision_matches_the_reference(case: dict[str, Any]) -> None:
    check = green.check_receipt(
        case["receipt"],
        head_sha=GREEN["head_sha"],
        gate_id=GREEN["gate_id"],
        command=case["command"],
        now=GREEN_NOW,
    )
    ours = [check.honoured, check.reason]
    applying = _applying(GREEN_DIVERGENCES, case)
    if "schema-not-an-integer" in applying:
        assert ours == [False, "bad schema"]
    elif "receipt-body-names-another-gate" in applying:
        assert ours == [False, "gate id mismatch"]
    else:
        assert ours == case["reference"]


# --- the vectors and the divergence list ----------------------------------------------------------


def test_every_generated_file_is_replayed() -> None:
    assert {path.name for path in GENERATED.glob("*.json")} >= set(FILES)
    for vectors in FILES.values():
        assert vectors["_about"].startswith("Generated by scripts/conformance/")
        assert len(vectors["cases"]) >= 100


def test_every_listed_divergence_is_exercised_and_documented() -> None:
    listed = DIVERGENCES.read_text(encoding="utf-8")
    for name, divergences in ALL_DIVERGENCES.items():
        for divergence, applies in divergences.items():
            assert f"`{divergence}`" in listed, divergence
            assert any(applies(case) for case in FILES[name]["cases"]), divergence


def test_the_vectors_are_small() -> None:
    total = sum((GENERATED / name).stat().st_size for name in FILES)
    assert total <= 2 * 1024 * 1024, total


def _written_as_generated(path: Path) -> bool:
    return path.read_text(encoding="utf-8").endswith("\n ]\n}\n")


def test_the_files_are_as_the_generator_writes_them() -> None:
    assert all(_written_as_generated(GENERATED / name) for name in FILES)
