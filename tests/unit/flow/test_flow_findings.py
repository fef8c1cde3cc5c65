"""Structured findings v1: every bound at its limit and one past it, and the strict rules."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from forkhorse.flow.envelope import check_findings_binding, validate_receipt
from forkhorse.flow.findings import (
    MAX_ENCODED_BYTES,
    canonical_order,
    encoded_size,
    validate_container,
)
from forkhorse.flow.ids import finding_id, source_receipt_id
from forkhorse.flow.rules import RuleViolation

from tests.unit.flow.flow_factories import HEAD, container, item, receipt, root

Container = dict[str, Any]


def violation(value: Container) -> RuleViolation | None:
    try:
        validate_container(value)
    except RuleViolation as error:
        return error
    return None


def anchored() -> Container:
    return container("round-1", [item("round-1", 1, anchored=True), item("round-1", 2)])


def with_source(source: str) -> Container:
    return root(source, 2)


def with_items(count: int) -> Container:
    return root("r", count)


def with_r_ids(count: int) -> Container:
    value = root("r", 1)
    value["items"][0]["rIds"] = [f"R{n}" for n in range(1, count + 1)]
    return value


def with_field(field: str, length: int) -> Container:
    value = root("r", 1)
    value["items"][0][field] = "é" * length  # characters, not bytes
    return value


def with_path(key: str, length: int) -> Container:
    value = anchored()
    value["items"][0]["anchor"][key] = "d/" + "p" * (length - 2)
    return value


def with_backend(length: int) -> Container:
    value = root("r", 1)
    value["backend"] = "b" * length
    return value


def with_sha(key: str, length: int) -> Container:
    value = root("r", 1)
    value[key] = "f" * length
    return value


BOUNDS: list[tuple[str, Callable[[int], Container], int, str]] = [
    ("items", with_items, 200, "findings.items"),
    ("rIds", with_r_ids, 32, "item.rIds"),
    ("sourceReceiptId", lambda n: with_source("s" * n), 160, "findings.id"),
    ("backend", with_backend, 160, "findings.backend"),
    ("baseSha", lambda n: with_sha("baseSha", n), 160, "findings.sha"),
    ("headSha", lambda n: with_sha("headSha", n), 160, "findings.sha"),
    ("anchor.path", lambda n: with_path("path", n), 1024, "anchor.path"),
    ("anchor.originalPath", lambda n: with_path("originalPath", n), 1024, "anchor.path"),
    ("title", lambda n: with_field("title", n), 240, "item.title"),
    ("body", lambda n: with_field("body", n), 4000, "item.body"),
    ("suggestion", lambda n: with_field("suggestion", n), 4000, "item.suggestion"),
]


@pytest.mark.parametrize(
    ("build", "limit", "rule"), [b[1:] for b in BOUNDS], ids=[b[0] for b in BOUNDS]
)
def test_bound_at_limit_and_one_past(
    build: Callable[[int], Container], limit: int, rule: str
) -> None:
    assert violation(build(limit)) is None
    error = violation(build(limit + 1))
    assert error is not None
    assert error.rule == rule


def sized_container(target_bytes: int) -> Container:
    """A valid container whose compact UTF-8 encoding is exactly `target_bytes` long."""
    value = root("r", 1)
    ordinal = 1
    while encoded_size(value) + 9000 < target_bytes:
        value["items"][-1]["body"] = "x" * 4000
        value["items"][-1]["suggestion"] = "x" * 4000
        ordinal += 1
        value["items"].append(item("r", ordinal))
    last = value["items"][-1]
    last["body"] = "x"
    last["suggestion"] = "x"
    remaining = target_bytes - encoded_size(value)
    last["body"] = "x" * (1 + min(remaining, 3999))
    last["suggestion"] = "x" * (1 + remaining - min(remaining, 3999))
    assert encoded_size(value) == target_bytes
    return value


def test_encoded_size_exactly_at_256_kib_and_one_byte_past() -> None:
    assert violation(sized_container(MAX_ENCODED_BYTES)) is None
    error = violation(sized_container(MAX_ENCODED_BYTES + 1))
    assert error is not None
    assert error.rule == "findings.size"


def test_encoded_size_counts_utf8_bytes_not_characters() -> None:
    value = sized_container(MAX_ENCODED_BYTES)
    value["items"][0]["body"] = "é" + value["items"][0]["body"][1:]  # same length, one byte more
    error = violation(value)
    assert error is not None
    assert error.rule == "findings.size"


@pytest.mark.parametrize("bad", [True, False, 1.0, "1", None, 0, -1])
@pytest.mark.parametrize(
    ("where", "rule"),
    [(("round",), "findings.round"), (("items", 0, "ordinal"), "item.ordinal")],
)
def test_positive_integers_are_never_booleans_or_floats(
    bad: object, where: tuple[Any, ...], rule: str
) -> None:
    value = root("r", 1)
    target: Any = value
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = bad
    error = violation(value)
    assert error is not None
    assert error.rule in {rule, "item.id-derived"}


@pytest.mark.parametrize("bad", [True, 1.0, 25.0, "100", None])
def test_confidence_is_a_canonical_integer(bad: object) -> None:
    value = root("r", 1)
    value["items"][0]["confidence"] = bad
    error = violation(value)
    assert error is not None
    assert error.rule == "item.confidence"


@pytest.mark.parametrize("bad", [True, 1.0, 0, -3])
def test_anchor_lines_are_positive_integers(bad: object) -> None:
    value = anchored()
    value["items"][0]["anchor"]["startLine"] = bad
    error = violation(value)
    assert error is not None
    assert (error.rule, error.pointer) == ("anchor.line", "/items/0/anchor/startLine")


def test_single_line_range_is_valid_and_inverted_range_names_end_line() -> None:
    value = anchored()
    value["items"][0]["anchor"]["endLine"] = 10
    assert violation(value) is None
    value["items"][0]["anchor"]["endLine"] = 9
    error = violation(value)
    assert error is not None
    assert (error.rule, error.pointer) == ("anchor.range", "/items/0/anchor/endLine")


@pytest.mark.parametrize(
    "path",
    [
        "../x",
        "a/../b",
        "/abs",
        "./a.py",
        "a/./b",
        "a//b",
        "a/",
        ".",
        "a\\b",
        "a\0b",
        "",
        "C:/x/a.py",
        "z:/a.py",
    ],
)
def test_unsafe_or_unnormalized_paths_reject_the_generation(path: str) -> None:
    for key in ("path", "originalPath"):
        value = anchored()
        value["items"][0]["anchor"][key] = path
        error = violation(value)
        assert error is not None
        assert error.rule == "anchor.path"


@pytest.mark.parametrize(
    ("blob", "ok"),
    [
        ("abcdef0", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("abcdef", False),
        ("ABCDEF0", False),
        ("ghijklm", False),
    ],
)
def test_blob_oid(blob: str, ok: bool) -> None:
    value = anchored()
    value["items"][0]["anchor"]["blobOid"] = blob
    assert (violation(value) is None) is ok


@pytest.mark.parametrize("missing", ["baseSha", "headSha", "path", "side", "startLine"])
def test_stored_anchor_must_be_complete_and_snapshot_bound(missing: str) -> None:
    value = anchored()
    del value["items"][0]["anchor"][missing]
    error = violation(value)
    assert error is not None
    assert (error.rule, error.pointer) == ("anchor.required", f"/items/0/anchor/{missing}")


def test_anchor_base_sha_must_equal_the_container() -> None:
    value = anchored()
    value["items"][0]["anchor"]["baseSha"] = "d" * 40
    error = violation(value)
    assert error is not None
    assert error.rule == "anchor.binding"


@pytest.mark.parametrize(
    ("r_id", "ok"),
    [
        ("R1", True),
        ("R10", True),
        ("R0", True),  # R<digits> as written: reference receipts keep R01
        ("R01", True),
        ("R" + "9" * 159, True),
        ("R" + "9" * 160, False),  # an id string, bounded at 160 characters
        ("r1", False),
        ("R", False),
        ("R1 ", False),
        ("R\u0663", False),  # ARABIC-INDIC DIGIT THREE: digits are ASCII
    ],
)
def test_r_id_grammar(r_id: str, ok: bool) -> None:
    value = root("r", 1)
    value["items"][0]["rIds"] = [r_id]
    assert (violation(value) is None) is ok


@pytest.mark.parametrize("alias", ["Critical", "p1", " P1", "P4"])
def test_severity_aliases_are_never_coerced(alias: str) -> None:
    value = root("r", 1)
    value["items"][0]["severity"] = alias
    error = violation(value)
    assert error is not None
    assert error.rule == "item.severity"


def test_root_is_round_one_and_successor_round_two_or_more() -> None:
    value = root("r2", 1)
    value["supersedesReceiptId"] = "r1"
    assert violation(value) is not None
    value["round"] = 2
    assert violation(value) is None


def test_duplicate_ids_and_ordinals_are_rejected() -> None:
    value = root("r", 2)
    value["items"][1] = copy.deepcopy(value["items"][0])
    error = violation(value)
    assert error is not None
    assert error.rule == "item.id-unique"


def test_unknown_key_pointer_is_escaped() -> None:
    value = root("r", 1)
    value["a/b~c"] = 1
    error = violation(value)
    assert error is not None
    assert error.pointer == "/a~1b~0c"


def test_receipt_violation_names_a_json_pointer_into_the_receipt() -> None:
    findings = container("r", [item("r", n, anchored=True) for n in range(1, 5)])
    findings["items"][3]["anchor"]["endLine"] = 1
    violation_found = validate_receipt(receipt(findings)).violation
    assert violation_found is not None
    assert violation_found.rule == "anchor.range"
    assert violation_found.pointer == "/findings/items/3/anchor/endLine"


def test_canonical_order_is_severity_then_confidence_desc_then_ordinal() -> None:
    items = [
        item("r", 1, severity="P2", confidence=100),
        item("r", 2, severity="P0", confidence=25),
        item("r", 3, severity="P2", confidence=100),
        item("r", 4, severity="P2", confidence=50),
        item("r", 5, severity="P1", confidence=0),
    ]
    assert [i["ordinal"] for i in canonical_order(items)] == [2, 5, 1, 3, 4]


def test_empty_items_is_a_valid_no_findings_generation() -> None:
    assert violation(container("r", [])) is None


def test_item_ids_are_recomputed_not_trusted() -> None:
    value = root("r", 1)
    value["items"][0]["id"] = finding_id("r", 2)
    error = violation(value)
    assert error is not None
    assert error.rule == "item.id-derived"


class TestEnvelope:
    def test_legacy_rp_mode_reads_with_a_matching_backend(self) -> None:
        assert validate_receipt(receipt(root("r", 1, backend="rp"), mode="rp")).valid

    @pytest.mark.parametrize(
        ("changes", "rule"),
        [
            ({"type": "review"}, "receipt.type"),
            ({"mode": "gpt"}, "receipt.mode"),
            ({"verdict": "ship"}, "receipt.verdict"),
            ({"verdict": None}, "receipt.verdict"),
        ],
    )
    def test_envelope_enums(self, changes: dict[str, Any], rule: str) -> None:
        body = receipt(None, **changes)
        found = validate_receipt(body).violation
        assert found is not None
        assert found.rule == rule

    @pytest.mark.parametrize(
        ("receipt_type", "kind"),
        [
            ("plan_review", "plan"),
            ("impl_review", "implementation"),
            ("completion_review", "completion"),
            ("qa_verdict", "qa"),
        ],
    )
    def test_type_kind_binding(self, receipt_type: str, kind: str) -> None:
        assert validate_receipt(receipt(root("r", 1, kind=kind), type=receipt_type)).valid
        other = "plan" if kind != "plan" else "qa"
        assert not validate_receipt(receipt(root("r", 1, kind=other), type=receipt_type)).valid

    def test_qa_receipt_needs_no_verdict(self) -> None:
        body = receipt(None, type="qa_verdict")
        del body["verdict"]
        assert validate_receipt(body).valid

    def test_findings_require_a_mode(self) -> None:
        body = receipt(root("r", 1))
        del body["mode"]
        found = validate_receipt(body).violation
        assert found is not None
        assert found.rule == "receipt.mode"

    def test_non_object_receipts(self) -> None:
        for body in ([], "x", 1, None):
            found = validate_receipt(body).violation
            assert found is not None
            assert found.rule == "receipt.type"


def test_source_receipt_id_hashes_non_ascii_text_as_utf8() -> None:
    preimage = f'[1,"implementation","fn-1.1","codex",1,"{HEAD}","café ✓"]'
    expected = "review-" + hashlib.sha256(preimage.encode("utf-8")).hexdigest()
    derived = source_receipt_id(
        review_kind="implementation",
        review_id="fn-1.1",
        backend="codex",
        round_number=1,
        head_sha=HEAD,
        review_text="café ✓",
    )
    assert derived == expected


@pytest.mark.parametrize("missing", ["type", "mode"])
def test_a_projection_is_bound_only_to_a_receipt_that_names_type_and_mode(missing: str) -> None:
    body = receipt(root("r", 1))
    del body[missing]
    with pytest.raises(RuleViolation) as raised:
        check_findings_binding(body)
    assert (
        raised.value.rule == {"type": "binding.type-kind", "mode": "binding.mode-backend"}[missing]
    )
