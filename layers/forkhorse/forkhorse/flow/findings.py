"""Structured findings v1: validation of one stored generation (container) and its canonical order.

A container is validated on its own here; lineage rules that need other generations (complete
snapshots, first-seen references, parents) live in `currentness`. Stored values are canonical:
reviewer aliases (`Major`, `resolved`, `pre-existing`...) are parser input only and are rejected.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from forkhorse.flow.ids import finding_id
from forkhorse.flow.rules import (
    R_ID_PATTERN,
    Where,
    check_closed_keys,
    check_enum,
    check_string,
    child,
    fail,
    is_int,
    is_positive_int,
    require_list,
    require_mapping,
)

SCHEMA_VERSION: Final = 1
REVIEW_KINDS: Final = ("plan", "implementation", "completion", "qa")
SEVERITIES: Final = ("P0", "P1", "P2", "P3")
CONFIDENCES: Final = (0, 25, 50, 75, 100)
CLASSIFICATIONS: Final = ("introduced", "pre_existing")
STATUSES: Final = ("open", "fixed", "not_fixed", "withdrawn")
SIDES: Final = ("base", "head")

# The bounds table. Characters are code points; the container is measured as UTF-8 bytes.
MAX_ENCODED_BYTES: Final = 256 * 1024
MAX_ITEMS: Final = 200
MAX_R_IDS: Final = 32
MAX_ID_CHARS: Final = 160
MAX_SHA_CHARS: Final = 160
MAX_PATH_CHARS: Final = 1024
MAX_TITLE_CHARS: Final = 240
MAX_BODY_CHARS: Final = 4000
MAX_SUGGESTION_CHARS: Final = 4000

_BLOB_OID = re.compile(r"[0-9a-f]{7,64}")
_DRIVE = re.compile(r"[A-Za-z]:/")  # `C:/x/a.py` is absolute on Windows

CONTAINER_REQUIRED: Final = frozenset(
    {"schemaVersion", "sourceReceiptId", "reviewKind", "backend", "round", "headSha", "items"}
)
CONTAINER_OPTIONAL: Final = frozenset({"baseSha", "supersedesReceiptId"})
ITEM_REQUIRED: Final = frozenset(
    {
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
    }
)
ITEM_OPTIONAL: Final = frozenset({"priorFindingId", "anchor", "suggestion"})
# A stored anchor is snapshot-bound: both shas are required (unbound candidates never persist).
ANCHOR_REQUIRED: Final = frozenset({"path", "side", "startLine", "baseSha", "headSha"})
ANCHOR_OPTIONAL: Final = frozenset({"endLine", "originalPath", "blobOid"})


def encoded_size(findings: object) -> int:
    """UTF-8 size of the compact JSON encoding, the measure of the 256 KiB bound."""
    text = json.dumps(findings, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return len(text.encode("utf-8"))


def validate_container(findings: object, where: Where = ()) -> Mapping[str, Any]:
    """Validate one findings generation; raise `RuleViolation` naming the first failed rule."""
    container = require_mapping(findings, "findings.type", where)
    _check_encoded_size(container, where)
    check_closed_keys(
        container,
        required=CONTAINER_REQUIRED,
        optional=CONTAINER_OPTIONAL,
        rule_prefix="findings",
        where=where,
    )
    _check_header(container, where)
    items = require_list(container["items"], "findings.items", child(where, "items"))
    if len(items) > MAX_ITEMS:
        raise fail("findings.items", child(where, "items"), f"more than {MAX_ITEMS} items")
    for index, item in enumerate(items):
        _check_item(item, container, child(where, "items", index))
    _check_unique(items, "id", "item.id-unique", where)
    _check_unique(items, "ordinal", "item.ordinal-unique", where)
    return container


# Any surrogate escape in the ASCII encoding (a pair is a non-BMP character, a lone one is not).
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def _encodes_as_utf8(container: Mapping[str, Any]) -> bool:
    try:
        json.dumps(container, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical_order(items: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Severity P0 -> P3, then confidence descending, then ordinal ascending."""
    return sorted(
        items,
        key=lambda item: (SEVERITIES.index(item["severity"]), -item["confidence"], item["ordinal"]),
    )


def _check_encoded_size(container: Mapping[str, Any], where: Where) -> None:
    try:
        # \uXXXX escapes are never shorter than UTF-8, so the faster ASCII encoding is an upper
        # bound; the exact UTF-8 size is measured only when that bound is over the limit.
        text = json.dumps(container, separators=(",", ":"), allow_nan=False)
        bound = len(text)
        size = bound if bound <= MAX_ENCODED_BYTES else encoded_size(container)
    except (TypeError, ValueError, RecursionError) as exc:
        raise fail("findings.json", where, "not representable as JSON") from exc
    if _SURROGATE_ESCAPE.search(text) and not _encodes_as_utf8(container):
        # A lone surrogate cannot be UTF-8, so no receipt file can hold it, and the ids hashed
        # over UTF-8 (finding ids, history names) could not be computed: refused, never raised.
        raise fail("findings.json", where, "has a lone surrogate (not encodable as UTF-8)")
    if size > MAX_ENCODED_BYTES:
        raise fail("findings.size", where, f"encoded size {size} > {MAX_ENCODED_BYTES}")


def _check_header(container: Mapping[str, Any], where: Where) -> None:
    version = container["schemaVersion"]
    if not is_int(version) or version != SCHEMA_VERSION:
        raise fail("findings.schemaVersion", child(where, "schemaVersion"), "unsupported version")
    source = _check_id(container["sourceReceiptId"], child(where, "sourceReceiptId"))
    check_string(
        container["reviewKind"],
        rule="findings.reviewKind",
        where=child(where, "reviewKind"),
        max_chars=MAX_ID_CHARS,
    )
    check_enum(
        container["reviewKind"],
        REVIEW_KINDS,
        rule="findings.reviewKind",
        where=child(where, "reviewKind"),
    )
    check_string(
        container["backend"],
        rule="findings.backend",
        where=child(where, "backend"),
        max_chars=MAX_ID_CHARS,
    )
    _check_sha(container["headSha"], child(where, "headSha"))
    if "baseSha" in container:
        _check_sha(container["baseSha"], child(where, "baseSha"))
    _check_round(container, source, where)


def _check_round(container: Mapping[str, Any], source: str, where: Where) -> None:
    round_number = container["round"]
    if not is_positive_int(round_number):
        raise fail("findings.round", child(where, "round"), "must be a positive integer")
    if "supersedesReceiptId" not in container:
        if round_number != 1:
            raise fail("findings.root-round", child(where, "round"), "a root must be 1")
        return
    parent_where = child(where, "supersedesReceiptId")
    parent = _check_id(container["supersedesReceiptId"], parent_where)
    if parent == source:
        raise fail("findings.supersedes-self", parent_where, "supersedes itself")
    if round_number < 2:
        raise fail("findings.root-round", child(where, "round"), "a successor must be >= 2")


def _check_item(value: object, container: Mapping[str, Any], where: Where) -> None:
    item = require_mapping(value, "item.type", where)
    check_closed_keys(
        item, required=ITEM_REQUIRED, optional=ITEM_OPTIONAL, rule_prefix="item", where=where
    )
    own_id = _check_id(item["id"], child(where, "id"), rule="item.id")
    if not is_positive_int(item["ordinal"]):
        raise fail("item.ordinal", child(where, "ordinal"), "must be a positive integer")
    check_enum(item["severity"], SEVERITIES, rule="item.severity", where=child(where, "severity"))
    _check_confidence(item["confidence"], child(where, "confidence"))
    check_enum(
        item["classification"],
        CLASSIFICATIONS,
        rule="item.classification",
        where=child(where, "classification"),
    )
    check_enum(item["status"], STATUSES, rule="item.status", where=child(where, "status"))
    _check_prose(item, where)
    _check_r_ids(item["rIds"], child(where, "rIds"))
    _check_identity(item, own_id, container, where)
    if "anchor" in item:
        _check_anchor(item["anchor"], container, child(where, "anchor"))


def _check_confidence(value: object, where: Where) -> None:
    if not is_int(value) or value not in CONFIDENCES:
        raise fail("item.confidence", where, "must be one of 0, 25, 50, 75, 100")


def _check_prose(item: Mapping[str, Any], where: Where) -> None:
    check_string(
        item["title"], rule="item.title", where=child(where, "title"), max_chars=MAX_TITLE_CHARS
    )
    check_string(
        item["body"], rule="item.body", where=child(where, "body"), max_chars=MAX_BODY_CHARS
    )
    if "suggestion" in item:
        check_string(
            item["suggestion"],
            rule="item.suggestion",
            where=child(where, "suggestion"),
            max_chars=MAX_SUGGESTION_CHARS,
        )


def _check_r_ids(value: object, where: Where) -> None:
    r_ids = require_list(value, "item.rIds", where)
    if len(r_ids) > MAX_R_IDS:
        raise fail("item.rIds", where, f"more than {MAX_R_IDS} R-IDs")
    seen: set[str] = set()
    for index, r_id in enumerate(r_ids):
        if not isinstance(r_id, str) or not R_ID_PATTERN.fullmatch(r_id):
            raise fail("item.rIds-grammar", child(where, index), "must match R<digits>")
        if len(r_id) > MAX_ID_CHARS:
            raise fail("item.rIds-grammar", child(where, index), f"longer than {MAX_ID_CHARS}")
        if r_id in seen:
            raise fail("item.rIds-unique", child(where, index), "duplicate R-ID")
        seen.add(r_id)


def _check_identity(
    item: Mapping[str, Any], own_id: str, container: Mapping[str, Any], where: Where
) -> None:
    first_seen = _check_id(item["firstSeenReceiptId"], child(where, "firstSeenReceiptId"))
    last_seen = _check_id(item["lastSeenReceiptId"], child(where, "lastSeenReceiptId"))
    if last_seen != container["sourceReceiptId"]:
        raise fail("item.lastSeen", child(where, "lastSeenReceiptId"), "must equal sourceReceiptId")
    if own_id != finding_id(first_seen, item["ordinal"]):
        raise fail(
            "item.id-derived", child(where, "id"), "not derived from firstSeenReceiptId and ordinal"
        )
    if "priorFindingId" in item:
        prior_where = child(where, "priorFindingId")
        prior = _check_id(item["priorFindingId"], prior_where, rule="item.priorFindingId")
        if prior == own_id:
            raise fail("item.priorFindingId", prior_where, "names the item itself")


def _check_anchor(value: object, container: Mapping[str, Any], where: Where) -> None:
    anchor = require_mapping(value, "anchor.type", where)
    check_closed_keys(
        anchor,
        required=ANCHOR_REQUIRED,
        optional=ANCHOR_OPTIONAL,
        rule_prefix="anchor",
        where=where,
    )
    # Primary location first, then snapshot binding, then supplemental metadata and ordering.
    _check_path(anchor["path"], child(where, "path"))
    check_enum(anchor["side"], SIDES, rule="anchor.side", where=child(where, "side"))
    for key in ("startLine", "endLine"):
        if key in anchor and not is_positive_int(anchor[key]):
            raise fail("anchor.line", child(where, key), "must be a positive integer")
    for key in ("baseSha", "headSha"):
        _check_sha(anchor[key], child(where, key))
        if container.get(key) != anchor[key]:
            raise fail("anchor.binding", child(where, key), f"differs from the {key}")
    if "originalPath" in anchor:
        _check_path(anchor["originalPath"], child(where, "originalPath"))
    if "blobOid" in anchor:
        blob = anchor["blobOid"]
        if not isinstance(blob, str) or not _BLOB_OID.fullmatch(blob):
            raise fail("anchor.blobOid", child(where, "blobOid"), "7-64 lowercase hex")
    if anchor.get("endLine", anchor["startLine"]) < anchor["startLine"]:
        raise fail("anchor.range", child(where, "endLine"), "endLine < startLine")


def is_safe_path(path: str) -> bool:
    """Normalized, repository-relative (no root, no drive), no traversal, backslashes or NULs."""
    if path.startswith("/") or _DRIVE.match(path) or "\\" in path or "\0" in path:
        return False
    if posixpath.normpath(path) != path or path == ".":
        return False
    return ".." not in path.split("/")


def _check_path(value: object, where: Where) -> None:
    path = check_string(value, rule="anchor.path", where=where, max_chars=MAX_PATH_CHARS)
    if not is_safe_path(path):
        raise fail("anchor.path", where, "not a normalized repository-relative path")


def _check_id(value: object, where: Where, rule: str = "findings.id") -> str:
    return check_string(value, rule=rule, where=where, max_chars=MAX_ID_CHARS)


def _check_sha(value: object, where: Where) -> str:
    return check_string(value, rule="findings.sha", where=where, max_chars=MAX_SHA_CHARS)


def _check_unique(items: list[Any], key: str, rule: str, where: Where) -> None:
    seen: set[object] = set()
    for index, item in enumerate(items):
        if item[key] in seen:
            raise fail(rule, child(where, "items", index, key), f"duplicate {key}")
        seen.add(item[key])
