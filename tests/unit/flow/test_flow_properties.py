"""Property tests: random containers and mutations never raise, and nothing invalid is accepted.

"Invalid" is judged by an independent oracle: a JSON Schema of the v1 container (closed key
sets, JSON types where booleans are not integers, canonical enums, bounds, grammars), checked
with `jsonschema`. Whatever the validator accepts must satisfy it.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import jsonschema
from forkhorse.flow import green
from forkhorse.flow.classify import classify_receipt
from forkhorse.flow.criteria import parse_global_criteria
from forkhorse.flow.currentness import select_current
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.findings import validate_container
from forkhorse.flow.rules import RuleViolation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.flow.flow_factories import HEAD, container, item, receipt, root, successor

ID = {"type": "string", "minLength": 1, "maxLength": 160}
POSITIVE = {"type": "integer", "minimum": 1}
PATH = {
    "type": "string",
    "minLength": 1,
    "maxLength": 1024,
    "not": {"pattern": r"(^/|(^|/)\.\.?(/|$)|//|\\)"},
}
ANCHOR = {
    "type": "object",
    "additionalProperties": False,
    "required": ["path", "side", "startLine", "baseSha", "headSha"],
    "properties": {
        "path": PATH,
        "originalPath": PATH,
        "side": {"enum": ["base", "head"]},
        "startLine": POSITIVE,
        "endLine": POSITIVE,
        "baseSha": ID,
        "headSha": ID,
        "blobOid": {"type": "string", "pattern": "^[0-9a-f]{7,64}$"},
    },
}
ITEM = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "id",
        "ordinal",
        "severity",
        "confidence",
        "classification",
        "status",
        "title",
        "body",
        "rIds",
        "firstSeenReceiptId",
        "lastSeenReceiptId",
    ],
    "properties": {
        "id": {**ID, "pattern": "^finding-[0-9a-f]{32}$"},
        "priorFindingId": ID,
        "ordinal": POSITIVE,
        "severity": {"enum": ["P0", "P1", "P2", "P3"]},
        "confidence": {"type": "integer", "enum": [0, 25, 50, 75, 100]},
        "classification": {"enum": ["introduced", "pre_existing"]},
        "status": {"enum": ["open", "fixed", "not_fixed", "withdrawn"]},
        "anchor": ANCHOR,
        "title": {"type": "string", "minLength": 1, "maxLength": 240},
        "body": {"type": "string", "minLength": 1, "maxLength": 4000},
        "suggestion": {"type": "string", "minLength": 1, "maxLength": 4000},
        "rIds": {
            "type": "array",
            "maxItems": 32,
            "uniqueItems": True,
            "items": {"type": "string", "pattern": "^R[1-9][0-9]*$"},
        },
        "firstSeenReceiptId": ID,
        "lastSeenReceiptId": ID,
    },
}
CONTAINER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "schemaVersion",
        "sourceReceiptId",
        "reviewKind",
        "backend",
        "round",
        "headSha",
        "items",
    ],
    "properties": {
        "schemaVersion": {"type": "integer", "const": 1},
        "sourceReceiptId": ID,
        "reviewKind": {"enum": ["plan", "implementation", "completion", "qa"]},
        "backend": ID,
        "round": POSITIVE,
        "baseSha": ID,
        "headSha": ID,
        "supersedesReceiptId": ID,
        "items": {"type": "array", "maxItems": 200, "items": ITEM},
    },
}
ORACLE = jsonschema.Draft202012Validator(CONTAINER_SCHEMA)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def accepted(value: object) -> bool:
    try:
        validate_container(value)
    except RuleViolation:
        return False
    return True


def seed() -> dict[str, Any]:
    value = container(
        "r1", [item("r1", 1, anchored=True), item("r1", 2, suggestion="Fix.", rIds=["R1", "R2"])]
    )
    value["items"][0]["anchor"].update(originalPath="old/a.py", blobOid="abcdef0")
    return value


def paths(value: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


def resolve(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    value = seed()
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(paths(value)))
        operation = draw(st.sampled_from(["replace", "delete", "add"]))
        parent = resolve(value, target[:-1]) if target else None
        if operation == "replace" and target:
            parent[target[-1]] = draw(json_values)
        elif operation == "delete" and target and isinstance(parent, dict):
            del parent[target[-1]]
        elif operation == "add" and isinstance(resolve(value, target), dict):
            resolve(value, target)[draw(st.text(max_size=8))] = draw(json_values)
    return value


@FAST
@given(json_values)
def test_random_values_never_raise(value: object) -> None:
    validate_receipt(value)
    validate_receipt({"type": "impl_review", "mode": "codex", "verdict": "SHIP", "findings": value})
    classify_receipt(value, HEAD, [value])
    select_current([value], head_sha=HEAD, review_kind="implementation", backend="codex")
    green.check_receipt(value, head_sha=HEAD, gate_id="g", command="c", now=datetime.now(UTC))
    assert not accepted(value) or ORACLE.is_valid(value)


@FAST
@given(mutated())
def test_mutations_never_raise_and_nothing_invalid_is_accepted(value: dict[str, Any]) -> None:
    if accepted(value):
        assert ORACLE.is_valid(value), list(ORACLE.iter_errors(value))
    result = classify_receipt(receipt(value), HEAD)
    assert not result["valid"] or accepted(value)  # a valid receipt implies a valid container


@FAST
@given(
    st.sampled_from(paths(seed())[1:]),
    st.text(min_size=1, max_size=8).filter(lambda k: k not in {"items"}),
)
def test_unknown_keys_anywhere_are_rejected(target: tuple[Any, ...], key: str) -> None:
    value = seed()
    node = resolve(value, target)
    if isinstance(node, dict) and key not in node:
        node[key] = 1
        assert not accepted(value)


@FAST
@given(
    st.sampled_from([p for p in paths(seed()) if isinstance(resolve(seed(), p), int)]),
    st.booleans(),
)
def test_booleans_never_pass_as_integers(target: tuple[Any, ...], flag: bool) -> None:
    value = seed()
    resolve(value, target[:-1])[target[-1]] = flag
    assert not accepted(value)


@FAST
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_shuffled_lineages_select_the_same_tip(lengths: list[int], rnd: Any) -> None:
    generations = [root("g1", lengths[0])]
    for number, new in enumerate(lengths[1:], start=2):
        generations.append(successor(generations[-1], f"g{number}", new=new))
    receipts = [receipt(copy.deepcopy(g)) for g in generations]
    rnd.shuffle(receipts)
    selection = select_current(
        receipts, head_sha=HEAD, review_kind="implementation", backend="codex"
    )
    assert selection.tip is not None
    assert selection.tip["sourceReceiptId"] == f"g{len(lengths)}"


@FAST
@given(st.text(max_size=300))
def test_criteria_parse_never_raises(text: str) -> None:
    parse_global_criteria("## Global criteria\n" + text)
