"""The project's standing criteria, configured in `.flow/criteria.md`.

Grammar: one `- **G<N>:** <criterion prose>` bullet per criterion; other lines (headings,
prose) are ignored, except a bullet that clearly means a G-ID but breaks the grammar, which is
an error so an all-typo file fails closed. Ids are unique, prose is non-empty, and at most 100
criteria are active (a larger file could never produce the receipt's compliance array).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow.producer import read_bounded_text

CRITERIA_FILE: Final = Path(".flow") / "criteria.md"

_CRITERION = re.compile(r"-\s+\*\*G([1-9][0-9]*):\*\*\s*(.*)")
# A bullet that intends a G-ID: any G-number bullet with a colon, or a bold G-number.
_LOOKS_LIKE_CRITERION = re.compile(r"[-*+]\s+(?:\*\*G[0-9]\S*|\**G[0-9]+\**\s*:)")

Criterion = dict[str, str]


class CriteriaError(Exception):
    """`.flow/criteria.md` exists but cannot be used; the message lists every problem."""


def criteria_path(root: Path) -> Path:
    return root / CRITERIA_FILE


def parse_criteria_file(text: str) -> tuple[list[Criterion], list[str]]:
    """The configured criteria `[{id, text}]` and every problem found (empty when valid)."""
    entries: list[Criterion] = []
    problems: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        match = _CRITERION.fullmatch(line)
        if match is None:
            if _LOOKS_LIKE_CRITERION.match(line):
                problems.append(
                    "malformed criterion bullet (expected `- **G<N>:** <prose>`): "
                    + line.strip()[:80]
                )
            continue
        criterion_id, prose = f"G{match.group(1)}", match.group(2).strip()
        if criterion_id in seen:
            duplicate = f"duplicate id {criterion_id}"
            if duplicate not in problems:
                problems.append(duplicate)
        elif not prose:
            problems.append(f"empty criterion text for {criterion_id}")
        else:
            seen.add(criterion_id)
            entries.append({"id": criterion_id, "text": prose})
    cap = FLOW_PRODUCER.criteria_entries
    if len(entries) > cap:
        problems.append(
            f"too many criteria: {len(entries)} active criteria exceed the limit of {cap}"
        )
    return entries, problems


def read_criteria(root: Path) -> list[Criterion]:
    """The configured criteria; [] when the file is absent; CriteriaError when unusable."""
    path = criteria_path(root)
    if not path.exists():
        if os.path.lexists(path):
            raise CriteriaError("invalid .flow/criteria.md: broken symlink")
        return []
    try:
        text = read_bounded_text(path, FLOW_PRODUCER.criteria_file_bytes)
    except (OSError, ValueError) as exc:
        raise CriteriaError(f"invalid .flow/criteria.md: unreadable ({exc})") from None
    entries, problems = parse_criteria_file(text)
    if problems:
        raise CriteriaError("invalid .flow/criteria.md: " + "; ".join(problems))
    return entries


def configured_ids(root: Path) -> tuple[str, ...]:
    """The ids a receipt's criteria must equal; () when absent or unusable (criteria omitted)."""
    try:
        return tuple(entry["id"] for entry in read_criteria(root))
    except CriteriaError:
        return ()
