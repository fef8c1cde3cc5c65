"""Standing-criteria compliance on `completion_review` receipts.

Two surfaces: `parse_global_criteria` projects a reviewer's `## Global criteria` section and
degrades anything it cannot read to absent (`None`), never to an error; `validate_criteria`
checks a stored `criteria` array and rejects it with a rule and a pointer.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Final

from forkhorse.flow.rules import (
    G_ID_PATTERN,
    Where,
    check_closed_keys,
    check_enum,
    check_string,
    child,
    fail,
    require_list,
    require_mapping,
)

CRITERIA_STATUSES: Final = ("met", "violated", "n/a")
MAX_NOTE_CHARS: Final = 400
MAX_REVIEW_TEXT_BYTES: Final = 1024 * 1024
CRITERIA_RECEIPT_TYPE: Final = "completion_review"

MAX_CRITERIA: Final = 100  # entries in one projection, as the reference caps it

_HEADING = re.compile(r"#{1,6}\s")
_CRITERIA_HEADING = re.compile(r"#{2,3}\s+Global criteria\s*:?\s*", re.IGNORECASE)
_VERDICT_LINE = re.compile(r"<verdict>(?:SHIP|NEEDS_WORK|MAJOR_RETHINK|NEEDS_HUMAN)</verdict>")
_ENTRY = re.compile(r"G([1-9][0-9]*):\s*(met|violated|n/a)\s*(?:-\s*(.*))?")

Criterion = dict[str, str]


def parse_global_criteria(review_text: object) -> list[Criterion] | None:
    """The criteria array from the last `## Global criteria` section, or None when unusable.

    The section has an exact grammar, so any other non-blank line in it, a duplicate id, a
    note over 400 characters or more than 100 entries makes the projection absent.
    """
    if not isinstance(review_text, str) or len(review_text.encode("utf-8")) > MAX_REVIEW_TEXT_BYTES:
        return None
    section = _last_section(review_text.replace("\r\n", "\n").split("\n"))
    entries: list[Criterion] = []
    for line in section:
        entry = _parse_entry(line)
        if entry is None or any(seen["id"] == entry["id"] for seen in entries):
            return None
        entries.append(entry)
        if len(entries) > MAX_CRITERIA:
            return None
    return entries or None


def bind_criteria(
    parsed: list[Criterion] | None, configured_ids: Collection[str]
) -> list[Criterion] | None:
    """Attach only when the recorded ids are exactly the configured standing criteria."""
    if parsed is None or {entry["id"] for entry in parsed} != set(configured_ids):
        return None
    return parsed


def validate_criteria(receipt: Mapping[str, Any], where: Where = ()) -> None:
    """Check a stored `criteria` field; legacy receipts without it (or with null) stay valid."""
    value = receipt.get("criteria")
    if value is None:
        return
    field_where = child(where, "criteria")
    if receipt.get("type") != CRITERIA_RECEIPT_TYPE:
        raise fail("criteria.receipt-type", field_where, "only on completion_review")
    entries = require_list(value, "criteria.type", field_where)
    if not entries:
        raise fail("criteria.empty", field_where, "must not be empty")
    if len(entries) > MAX_CRITERIA:
        raise fail("criteria.too-many", field_where, f"more than {MAX_CRITERIA} entries")
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        criterion_id = _check_criterion(entry, child(field_where, index))
        if criterion_id in seen:
            raise fail("criteria.id-unique", child(field_where, index, "id"), "duplicate")
        seen.add(criterion_id)


def _check_criterion(value: object, where: Where) -> str:
    entry = require_mapping(value, "criteria.entry", where)
    check_closed_keys(
        entry,
        required=frozenset({"id", "status"}),
        optional=frozenset({"note"}),
        rule_prefix="criteria",
        where=where,
    )
    criterion_id = entry["id"]
    if not isinstance(criterion_id, str) or not G_ID_PATTERN.fullmatch(criterion_id):
        raise fail("criteria.id", child(where, "id"), "must match G<digits>")
    check_enum(
        entry["status"], CRITERIA_STATUSES, rule="criteria.status", where=child(where, "status")
    )
    if "note" in entry:
        check_string(
            entry["note"],
            rule="criteria.note",
            where=child(where, "note"),
            max_chars=MAX_NOTE_CHARS,
        )
    return criterion_id


def _last_section(lines: list[str]) -> list[str]:
    """Non-blank stripped lines of the last criteria section, to the next heading or verdict."""
    starts = [
        index for index, line in enumerate(lines) if _CRITERIA_HEADING.fullmatch(line.strip())
    ]
    if not starts:
        return []
    section: list[str] = []
    for line in lines[starts[-1] + 1 :]:
        text = line.strip()
        if _HEADING.match(text) or _VERDICT_LINE.fullmatch(text):
            break
        if text:
            section.append(text)
    return section


def _parse_entry(line: str) -> Criterion | None:
    if line.startswith(("- ", "* ", "+ ")):
        line = line[2:].strip()
    match = _ENTRY.fullmatch(line)
    if match is None:
        return None
    entry: Criterion = {"id": f"G{match.group(1)}", "status": match.group(2)}
    note = (match.group(3) or "").strip()
    if len(note) > MAX_NOTE_CHARS:
        return None
    if note:
        entry["note"] = note
    return entry
