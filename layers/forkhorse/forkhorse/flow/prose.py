"""Reviewer prose -> structured findings v1: the producer's parser (pure, no I/O).

The grammar is the one Flow-Next reviewers write: labeled finding blocks (`Severity: Major`,
`File:Line: src/a.py:3`...), host headings (`### Major · confidence 75 · introduced`), the
compact form (`[P1, confidence 75, introduced=true] src/a.py:3 — summary`), the host finding
table, `Prior finding N: fixed` ratchet records, the `Prior findings: all fixed` sweep and an
explicit-empty `SHIP`. Anything ambiguous or malformed makes the whole projection absent
(`None`): a reader then falls back to the receipt and prose, never to a wrong verdict.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from forkhorse.flow.criteria import MAX_REVIEW_TEXT_BYTES
from forkhorse.flow.findings import (
    CLASSIFICATIONS,
    CONFIDENCES,
    MAX_ID_CHARS,
    MAX_ITEMS,
    MAX_PATH_CHARS,
    MAX_R_IDS,
    REVIEW_KINDS,
    SCHEMA_VERSION,
    SIDES,
    canonical_order,
    validate_container,
)
from forkhorse.flow.ids import finding_id
from forkhorse.flow.rules import RuleViolation, is_int

SEVERITY_ALIASES: Final = {
    "p0": "P0",
    "critical": "P0",
    "p1": "P1",
    "major": "P1",
    "p2": "P2",
    "minor": "P2",
    "p3": "P3",
    "nitpick": "P3",
}
# Keys are lower-case with runs of space, `-` and `_` collapsed to one space.
STATUS_ALIASES: Final = {
    "open": "open",
    "fixed": "fixed",
    "fixed in review": "fixed",
    "resolved": "fixed",
    "not fixed": "not_fixed",
    "not_fixed": "not_fixed",  # a table disposition is not collapsed
    "remains open": "not_fixed",
    "unresolved": "not_fixed",
    "withdrawn": "withdrawn",
}

Row = dict[str, Any]


class _Unparseable(Exception):
    """The prose is recognised but ambiguous or malformed: the projection is absent."""


@dataclass(frozen=True, slots=True)
class ParseScope:
    """Everything a generation is bound to besides the prose itself."""

    source_receipt_id: str
    review_kind: str
    backend: str
    round_number: int
    head_sha: str
    base_sha: str | None = None
    supersedes_receipt_id: str | None = None
    prior_findings: Mapping[str, Any] | None = None
    anchor_side: str | None = None


# --- the grammar -------------------------------------------------------------------------------

_LIST_MARKER = r"(?:(?:[-*+]|\d+[.)])[ \t]+)?"
_PRIOR_LINE = r"^[ \t]*" + _LIST_MARKER + r"prior[ \t-]+finding"
_SEPARATOR = r"[ \t]*(?:[:\u2014-][ \t]*)?"
_RATCHET_STATUS = (
    r"fixed(?:[ \t]+in[ \t]+review)?|resolved|not[\s_-]fixed|remains[ \t]+open|unresolved|withdrawn"
)
_RATCHET = re.compile(
    _PRIOR_LINE
    + r"(?:[ \t]*\#?(?P<ordinal>\d+))?"
    + _SEPARATOR
    + r"(?:\*\*)?(?P<status>"
    + _RATCHET_STATUS
    + r")(?:\*\*)?(?![A-Za-z0-9_-])",
    re.IGNORECASE | re.MULTILINE,
)
# Any line that reads like a prior-finding record; counted so an unknown status is never lost.
_RATCHET_LIKE = re.compile(
    _PRIOR_LINE
    + r"(?![ \t]+id[ \t]*[:=])(?:[ \t]*\#?\d+)?"
    + _SEPARATOR
    + r"(?:\*\*)?[A-Za-z][^\r\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
# The aggregate all-clear must be the whole line: a qualifier ("except #2") is not a sweep.
_ALL_CLEAR = re.compile(
    _PRIOR_LINE
    + r"s(?:\*\*)?"
    + _SEPARATOR
    + r"(?:\*\*)?all[ \t]+fixed(?:\*\*)?[ \t]*[.!]?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_LABELS = (
    r"severity|confidence|classification|problem|suggestion|suggested fix|finding|title|"
    r"file\s*:\s*line|file|path|line|side|original\s*path|original\s*file|blob\s*oid|r-?ids?|"
    r"prior\s*finding\s*id"
)
_FIELD = re.compile(
    r"^\s*(?:[-*]\s*)?(?:\*\*)?(?P<label>" + _LABELS + r")(?:\*\*)?\s*[:=]\s*(?P<value>.*?)\s*$",
    re.IGNORECASE,
)
_FIELD_LINE_PREFIX = re.compile(r"^\s*(?:(?:[-*]|\d+[.)])\s*)?")
_WORD = r"[a-z][a-z0-9_-]*"
_HOST_HEADING = re.compile(
    r"\b(" + _WORD + r")\b\s*[\u00b7|,-]\s*confidence\s+([^\s\u00b7|,]+)"
    r"\s*[\u00b7|,-]\s*(" + _WORD + r"(?:[ -]" + _WORD + r")?)\s*(?:\*\*)?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_COMPACT_START = r"^[ \t]*" + _LIST_MARKER + r"(?:\*\*)?\["
_COMPACT_LIKE = re.compile(
    _COMPACT_START + r"[^\]\r\n]*\bconfidence\b[^\]\r\n]*\bintroduced[ \t]*=",
    re.IGNORECASE | re.MULTILINE,
)
# The compact form's bracket; the rest of the line (` <location> — <summary>`) is split by
# `_split_compact_tail`, which keeps the reference's regex semantics in linear time.
_COMPACT_HEAD = re.compile(
    _COMPACT_START + r"(?P<severity>[^,\]\r\n]+),[ \t]*confidence[ \t]+(?P<confidence>[^,\]\s]+),"
    r"[ \t]*introduced[ \t]*=[ \t]*(?P<introduced>[^,\]\s]+)\]",
    re.IGNORECASE,
)
_EM_DASH: Final = "\u2014"
_BLANKS: Final = " \t"
# Characters of a host heading's first word; a search restarts only at each run's first start.
_HEADING_WORD_RUN = re.compile(r"[a-z0-9_-]+", re.IGNORECASE)
_HEADING_WORD_START = re.compile(r"\b[a-z]", re.IGNORECASE)
_CONFIDENCE = re.compile("confidence", re.IGNORECASE)
_LOCATION = re.compile(r"(?P<path>.+?):(?P<start>[1-9]\d*)(?:\s*[-\u2013]\s*(?P<end>[1-9]\d*))?")
_LINES = re.compile(r"([1-9]\d*)(?:\s*[-\u2013]\s*([1-9]\d*))?")
# ASCII digits only, as the validator's `R_ID_PATTERN`: `R\u0661` is no R-ID, and `R1\u0662` is not
# `R1` either (no digit of any script may follow).
_R_ID = re.compile(r"(?<![A-Za-z0-9])R(?:-|\s)?([0-9]+)(?![A-Za-z0-9]|\d)")
_BLOB_OID = re.compile(r"[0-9a-fA-F]{7,64}")
_TABLE_RULE = re.compile(r"^\s*\|(?:\s*:?-{3,}:?\s*\|)+\s*$")
_TABLE_HEADERS: Final = frozenset({"sev", "confidence", "classification", "finding", "disposition"})
_VERDICT_TAG = re.compile(r"<verdict>", re.IGNORECASE)
_BLOCK_END = re.compile(
    r"^\s*##\s+requirements coverage\s*#*\s*$"
    r"|^\s*(?:classification counts|suppressed findings|unaddressed r-ids)\s*:",
    re.IGNORECASE,
)
_NO_FINDINGS = re.compile(
    r"\b(?:no\s+(?:blocking\s+)?findings?|found\s+no\s+correctness|no\s+blocking\s+gaps|"
    r"review\s+result:\s*no\s+findings?)\b",
    re.IGNORECASE,
)
_SHIP = re.compile(r"<verdict>\s*SHIP\s*</verdict>", re.IGNORECASE)


# --- the public boundary -----------------------------------------------------------------------


def parse_findings(review_text: object, scope: ParseScope) -> dict[str, Any] | None:
    """The findings container for this generation, or None when it cannot be projected.

    Never raises on bad prose: over-size, ambiguous, malformed or inconsistent input all give
    None, and the result (when there is one) passes `validate_container`.
    """
    if not isinstance(review_text, str) or not _scope_ok(scope):
        return None
    try:
        if len(review_text.encode("utf-8")) > MAX_REVIEW_TEXT_BYTES:
            return None
        return _parse(review_text, scope)
    except (_Unparseable, RuleViolation, UnicodeError, ValueError, TypeError, KeyError):
        return None


def _scope_ok(scope: ParseScope) -> bool:
    def bounded(value: object) -> bool:
        return isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS

    round_number = scope.round_number
    supersedes = scope.supersedes_receipt_id
    if not (
        bounded(scope.source_receipt_id)
        and scope.review_kind in REVIEW_KINDS
        and bounded(scope.backend)
        and bounded(scope.head_sha)
        and (scope.base_sha is None or bounded(scope.base_sha))
        and is_int(round_number)
        and round_number >= 1
    ):
        return False
    if supersedes is None:
        return round_number == 1 and scope.prior_findings is None
    return bounded(supersedes) and round_number > 1 and supersedes != scope.source_receipt_id


def _parse(text: str, scope: ParseScope) -> dict[str, Any] | None:
    carried = _carry_prior(text, scope)
    if scope.supersedes_receipt_id is not None:
        _check_parent(scope)
    rows = _new_rows(text, scope)
    _check_prior_edges(rows, scope.prior_findings)
    has_ratchet = _RATCHET.search(text) is not None or _ALL_CLEAR.search(text) is not None
    if not rows and not has_ratchet and not is_explicit_empty(text):
        return None  # prose that states nothing structured must not advance the lineage
    container = _container(carried, rows, scope)
    validate_container(container)  # every bound, the 256 KiB encoding included: reject, never trim
    return container


def is_explicit_empty(text: str) -> bool:
    """A no-findings statement together with a `SHIP` verdict tag."""
    return _NO_FINDINGS.search(text) is not None and _SHIP.search(text) is not None


def _container(carried: list[Row], rows: list[Row], scope: ParseScope) -> dict[str, Any]:
    items = list(carried)
    used = {item["ordinal"] for item in items}
    ordinal = 0
    for row in rows:
        ordinal += 1
        while ordinal in used:
            ordinal += 1
        used.add(ordinal)
        source = scope.source_receipt_id
        items.append(
            {
                "id": finding_id(source, ordinal),
                "ordinal": ordinal,
                **row,
                "firstSeenReceiptId": source,
                "lastSeenReceiptId": source,
            }
        )
    container: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "sourceReceiptId": scope.source_receipt_id,
        "reviewKind": scope.review_kind,
        "backend": scope.backend,
        "round": scope.round_number,
    }
    if scope.base_sha is not None:
        container["baseSha"] = scope.base_sha
    container["headSha"] = scope.head_sha
    if scope.supersedes_receipt_id is not None:
        container["supersedesReceiptId"] = scope.supersedes_receipt_id
    container["items"] = canonical_order(items)
    return container


def _heading_search(text: str) -> re.Match[str] | None:
    """`_HOST_HEADING.search(text)` without its quadratic restarts inside one word run.

    A first word starts at a `\\b` before a letter and may run over `[a-z0-9_-]`; if the first
    such start in a run fails, every later start in that run fails too (it can only end at the
    same places), so only that one is tried.
    """
    if _CONFIDENCE.search(text) is None:
        return None
    for run in _HEADING_WORD_RUN.finditer(text):
        start = _HEADING_WORD_START.search(text, run.start(), run.end())
        if start is None:
            continue
        match = _HOST_HEADING.match(text, start.start())
        if match is not None:
            return match
    return None


def _compact_line(block: str) -> tuple[re.Match[str], str, str] | None:
    """The compact finding on the block's candidate line: (bracket, location, summary)."""
    candidate = _COMPACT_LIKE.search(block)
    if candidate is None:
        return None
    line_start = block.rfind("\n", 0, candidate.start()) + 1
    line_end = block.find("\n", candidate.start())
    line = block[line_start : line_end if line_end >= 0 else len(block)]
    head = _COMPACT_HEAD.match(line)
    if head is None:
        return None
    tail = _split_compact_tail(line[head.end() :])
    return None if tail is None else (head, *tail)


def _split_compact_tail(rest: str) -> tuple[str, str] | None:
    """Split `[ \\t]+<location>.+?[ \\t]+—[ \\t]+<summary>.+?(**)?[ \\t]*$` as the regex would."""
    if not rest or rest[0] not in _BLANKS:
        return None
    first = len(rest) - len(rest.lstrip(_BLANKS))
    dash = rest.find(_EM_DASH, first + 1)
    while dash >= 0:  # the location is lazy: the first dash that leaves a summary wins
        run_start = len(rest[:dash].rstrip(_BLANKS))
        if run_start < dash and run_start > first and _summary_follows(rest, dash):
            return rest[first:run_start], _summary(rest[dash + 1 :])
        dash = rest.find(_EM_DASH, dash + 1)
    # Backtracking the leading blanks: a one-blank location before a dash right after them.
    if 3 <= first < len(rest) and rest[first] == _EM_DASH and _summary_follows(rest, first):
        return rest[first - 2 : first - 1], _summary(rest[first + 1 :])
    return None


def _summary_follows(rest: str, dash: int) -> bool:
    after = rest[dash + 1 :]
    return len(after) >= 2 and after[0] in _BLANKS


def _summary(after_dash: str) -> str:
    text = after_dash.lstrip(_BLANKS)
    if not text:
        return after_dash[-1]  # all blanks: the regex gives the last one back to the summary
    text = text.rstrip(_BLANKS)
    return text[:-2] if text.endswith("**") and len(text) > 2 else text


# --- the ratchet: carrying the prior snapshot forward ------------------------------------------


def _count_bounded(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    found: list[re.Match[str]] = []
    for match in pattern.finditer(text):
        found.append(match)
        if len(found) > MAX_ITEMS:
            raise _Unparseable("too many prior-finding records")
    return found


def _carry_prior(text: str, scope: ParseScope) -> list[Row]:
    """The prior snapshot with this round's ratchet records applied (every item carries)."""
    record_count = len(_count_bounded(_RATCHET_LIKE, text))
    records = _count_bounded(_RATCHET, text)
    sweeps = len(_count_bounded(_ALL_CLEAR, text))
    if record_count != len(records) + sweeps:
        raise _Unparseable("a prior-finding record with an unknown status")
    prior = scope.prior_findings
    if prior is None and not records:
        return []  # a stray all-clear with nothing to sweep is inert
    if not isinstance(prior, Mapping) or prior.get("schemaVersion") != SCHEMA_VERSION:
        raise _Unparseable("records name a prior snapshot that is not there")
    validate_container(prior)
    prior_items: list[Mapping[str, Any]] = list(prior["items"])
    if any(record.group("ordinal") is None for record in records) and len(prior_items) != 1:
        raise _Unparseable("an unnumbered record is only clear with one prior finding")
    carried = [_carry_item(item, scope) for item in prior_items]
    by_ordinal = {item["ordinal"]: item for item in carried}
    if sweeps and not records:  # explicit per-finding records disable the sweep
        for item in carried:
            if item["status"] == "open":
                item["status"] = "fixed"
    for record in records:
        number = record.group("ordinal")
        ordinal = int(number) if number is not None else prior_items[0]["ordinal"]
        if ordinal not in by_ordinal:
            raise _Unparseable(f"no prior finding {ordinal}")
        by_ordinal[ordinal]["status"] = STATUS_ALIASES[_alias_key(record.group("status"))]
    return carried


def _carry_item(item: Mapping[str, Any], scope: ParseScope) -> Row:
    carried = copy.deepcopy(dict(item))
    carried["lastSeenReceiptId"] = scope.source_receipt_id
    # An unrepeated `not_fixed` does not survive the round: it reads `open` until restated.
    if carried["status"] == "not_fixed":
        carried["status"] = "open"
    anchor = carried.get("anchor")
    if isinstance(anchor, Mapping) and (
        anchor.get("headSha") != scope.head_sha or anchor.get("baseSha") != scope.base_sha
    ):
        del carried["anchor"]  # a stale location is dropped, never relabelled onto a new head
    return carried


def _check_parent(scope: ParseScope) -> None:
    prior = scope.prior_findings
    if (
        not isinstance(prior, Mapping)
        or prior.get("sourceReceiptId") != scope.supersedes_receipt_id
        or prior.get("reviewKind") != scope.review_kind
        or prior.get("backend") != scope.backend
        or not is_int(prior.get("round"))
        or prior["round"] + 1 != scope.round_number
    ):
        raise _Unparseable("the prior snapshot is not this generation's parent")


def _check_prior_edges(rows: Sequence[Row], prior: Mapping[str, Any] | None) -> None:
    """`Prior finding ID` edges must name distinct findings of the prior snapshot."""
    edges = [row["priorFindingId"] for row in rows if "priorFindingId" in row]
    known = {
        item["id"]
        for item in (prior or {}).get("items") or ()
        if isinstance(item, Mapping) and isinstance(item.get("id"), str)
    }
    if any(edge not in known for edge in edges) or len(set(edges)) != len(edges):
        raise _Unparseable("a Prior finding ID edge names no distinct prior finding")


def _alias_key(value: str) -> str:
    return re.sub(r"[-_\s]+", " ", value.lower()).strip()


# --- new findings: table, compact and labeled blocks ---------------------------------------------


def _new_rows(text: str, scope: ParseScope) -> list[Row]:
    table_rows = _table_rows(text)
    blocks, saw_severity = _blocks(text)
    if table_rows is not None:
        if saw_severity:
            raise _Unparseable("a finding table and finding blocks together")
        return table_rows
    rows = [_block_row(block, scope) for block in blocks]
    if saw_severity and not rows:
        raise _Unparseable("severity labels but no readable finding")
    return rows


def _table_rows(text: str) -> list[Row] | None:
    """Rows of the host finding table; None when there is no table."""
    lines = text.splitlines()
    header_at: int | None = None
    headers: list[str] = []
    for index, line in enumerate(lines):
        if not line.strip().startswith("|"):
            continue
        cells = _cells(line, lower=True)
        present = set(cells) & _TABLE_HEADERS
        if present == _TABLE_HEADERS:
            if header_at is not None or len(cells) != len(set(cells)):
                raise _Unparseable("two finding tables, or a repeated column")
            header_at, headers = index, cells
        elif len(present) >= 4 or ("finding" in present and len(present) >= 3):
            raise _Unparseable("a malformed finding-table header")
    if header_at is None:
        return None
    if header_at + 1 >= len(lines) or not _TABLE_RULE.match(lines[header_at + 1]):
        raise _Unparseable("a finding table without its rule line")
    rows: list[Row] = []
    for line in lines[header_at + 2 :]:
        if not line.strip().startswith("|"):
            break
        cells = _cells(line, lower=False)
        if len(cells) != len(headers):
            raise _Unparseable("a table row with the wrong number of cells")
        rows.append(_table_row(dict(zip(headers, cells, strict=True))))
        if len(rows) > MAX_ITEMS:
            raise _Unparseable("too many table rows")
    if not rows:
        raise _Unparseable("a finding table without rows")
    return rows


def _cells(line: str, *, lower: bool) -> list[str]:
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    return [cell.lower() for cell in cells] if lower else cells


def _table_row(cells: Mapping[str, str]) -> Row:
    status = STATUS_ALIASES.get(re.sub(r"\s+", " ", cells["disposition"].lower()).strip())
    if status is None:
        raise _Unparseable("unknown disposition")
    body = clean_markdown(cells["finding"])
    return {
        "severity": _severity(cells["sev"]),
        "confidence": _confidence(cells["confidence"]),
        "classification": _classification(cells["classification"]),
        "status": status,
        "title": _first_sentence(body),
        "body": body,
        "rIds": _r_ids(body),
    }


def _severity(value: str) -> str:
    severity = SEVERITY_ALIASES.get(value.strip().lower())
    if severity is None:
        raise _Unparseable(f"unknown severity {value!r}")
    return severity


def _confidence(value: str) -> int:
    try:
        confidence = int(value)
    except ValueError:
        raise _Unparseable(f"confidence {value!r}") from None
    if confidence not in CONFIDENCES:
        raise _Unparseable(f"confidence {confidence} is not an anchor")
    return confidence


def _classification(value: str) -> str:
    classification = re.sub(r"[\s-]+", "_", value.lower())
    if classification not in CLASSIFICATIONS:
        raise _Unparseable(f"unknown classification {value!r}")
    return classification


def _blocks(text: str) -> tuple[list[str], bool]:
    """Finding blocks (each starts at a severity-bearing line) and whether any such line exists."""
    lines = text.splitlines()
    starts: list[int] = []
    for index, line in enumerate(lines):
        has_severity = "severity" in (line_fields(line) or {})
        start = index
        titled = False
        if has_severity and index > 0 and "finding" in (line_fields(lines[index - 1]) or {}):
            start, titled = index - 1, True
        if has_severity and starts and not titled and _restates_heading(lines, starts[-1], index):
            continue  # labeled fields under a host heading belong to the heading's block
        if has_severity or _heading_search(line) or _COMPACT_LIKE.search(line):
            starts.append(start)
            if len(starts) > MAX_ITEMS:
                raise _Unparseable("too many findings")
    ends = [*starts[1:], len(lines)]
    blocks = [_block_text(lines[start:end]) for start, end in zip(starts, ends, strict=False)]
    return blocks, bool(starts)


def _restates_heading(lines: Sequence[str], start: int, index: int) -> bool:
    heading = "\n".join(lines[start:index])
    return _heading_search(heading) is not None and all(
        not line.strip() for line in lines[start + 1 : index]
    )


def _block_text(lines: Sequence[str]) -> str:
    kept: list[str] = []
    for line in lines:
        if _VERDICT_TAG.search(line) or _BLOCK_END.match(line):
            break
        kept.append(line)
    return "\n".join(kept).strip()


def line_fields(block: str) -> dict[str, str] | None:
    """Labeled fields of a block, keyed by normalised label; None when a label repeats."""
    fields: dict[str, str] = {}
    for line in block.splitlines():
        if ":" not in line and "=" not in line:
            continue  # a label is always followed by `:` or `=`
        match = _FIELD.match(_FIELD_LINE_PREFIX.sub("", line, count=1).replace("**", ""))
        if match is None:
            continue
        label = re.sub(r"[\s_-]+", " ", match.group("label").lower()).strip()
        if label in fields:
            return None  # singletons: line order must not pick the surviving value
        fields[label] = clean_markdown(match.group("value"))
    return fields


def clean_markdown(value: str) -> str:
    """Strip surrounding whitespace, one pair of backticks and leading/trailing bold markers."""
    value = value.strip()
    if len(value) >= 2 and value.startswith("`") and value.endswith("`"):
        value = value[1:-1]
    return re.sub(r"^\*{1,2}|\*{1,2}$", "", value).strip()


def _block_row(block: str, scope: ParseScope) -> Row:
    compact = _compact_row(block, scope)
    if compact is not None:
        return compact
    fields = line_fields(block)
    if fields is None:
        raise _Unparseable("a repeated finding field")
    severity, confidence, classification = _enums(fields, block)
    title, body, suggestion = _prose(fields, block)
    row: Row = {
        "severity": severity,
        "confidence": confidence,
        "classification": classification,
        "status": "open",
        "title": title,
        "body": body,
        "rIds": _r_ids(fields.get("r ids", block)),
    }
    anchor = _anchor(fields, scope)
    if anchor is not None:
        row["anchor"] = anchor
    if suggestion:
        row["suggestion"] = suggestion
    if fields.get("prior finding id"):
        row["priorFindingId"] = fields["prior finding id"]
    return row


def _compact_row(block: str, scope: ParseScope) -> Row | None:
    if _COMPACT_LIKE.search(block) is None:
        return None
    if len(_COMPACT_LIKE.findall(block)) != 1:
        raise _Unparseable("more than one compact finding in a block")
    parsed = _compact_line(block)
    if parsed is None:
        raise _Unparseable("a malformed compact finding")
    match, location, summary_text = parsed
    introduced = match.group("introduced").lower()
    if introduced not in ("true", "false"):
        raise _Unparseable("introduced must be true or false")
    severity = _severity(match.group("severity"))
    confidence = _confidence(match.group("confidence"))
    summary = clean_markdown(summary_text)
    if not summary:
        raise _Unparseable("a compact finding without a summary")
    fields = {"file:line": clean_markdown(location)}
    row: Row = {
        "severity": severity,
        "confidence": confidence,
        "classification": "introduced" if introduced == "true" else "pre_existing",
        "status": "open",
        "title": _first_sentence(summary),
        "body": summary,
        "rIds": _r_ids(block),
    }
    anchor = _anchor(fields, scope)
    if anchor is not None:
        row["anchor"] = anchor
    return row


def _enums(fields: Mapping[str, str], block: str) -> tuple[str, int, str]:
    """Severity, confidence and classification from labels and/or a host heading, which agree."""
    labeled: list[str | int | None] = [None, None, None]
    if fields.get("severity"):
        labeled[0] = _severity(fields["severity"])
    if fields.get("confidence"):
        try:
            labeled[1] = int(fields["confidence"].strip())
        except ValueError:
            raise _Unparseable("confidence is not a number") from None
    if fields.get("classification"):
        labeled[2] = re.sub(r"[\s-]+", "_", fields["classification"].strip().lower())
    heading = _heading_search(block)
    if heading is not None:
        from_heading: tuple[str | int, ...] = (
            _severity(heading.group(1)),
            _confidence(heading.group(2)),
            _classification(heading.group(3)),
        )
        for index, value in enumerate(from_heading):
            if labeled[index] is None:
                labeled[index] = value
            elif labeled[index] != value:
                raise _Unparseable("a label disagrees with its heading")
    severity, confidence, classification = labeled
    if severity is None or confidence not in CONFIDENCES or classification not in CLASSIFICATIONS:
        raise _Unparseable("severity, confidence or classification missing or unknown")
    return str(severity), int(confidence), str(classification)


def _single(fields: Mapping[str, str], *labels: str) -> str | None:
    """One value from alias labels, which must agree when several are given."""
    values = [fields[label] for label in labels if label in fields]
    if len({re.sub(r"\s+", " ", value).strip() for value in values}) > 1:
        raise _Unparseable(f"{' / '.join(labels)} disagree")
    return values[0] if values else None


def _prose(fields: Mapping[str, str], block: str) -> tuple[str, str, str | None]:
    body = _single(fields, "problem", "finding") or _unlabeled_prose(block)
    suggestion = _single(fields, "suggestion", "suggested fix")
    body = body.strip()
    title = (fields.get("title") or _first_sentence(body)).strip()
    if not title or not body:
        raise _Unparseable("a finding without a title or body")
    return title, body, suggestion.strip() if suggestion else None


def _unlabeled_prose(block: str) -> str:
    kept: list[str] = []
    for line in block.splitlines():
        text = line.strip().lstrip("-* ").strip()
        if (
            text
            and not text.startswith("#")
            and _FIELD.match(line) is None
            and _heading_search(line) is None
        ):
            kept.append(clean_markdown(text))
    return " ".join(kept)


def _first_sentence(text: str) -> str:
    return text.split(".", 1)[0].strip()


def _r_ids(source: str) -> list[str]:
    """Unique R-IDs in order; one past the bound is kept so the container check rejects it."""
    found: list[str] = []
    for match in _R_ID.finditer(source):
        r_id = f"R{match.group(1)}"
        if r_id not in found:
            found.append(r_id)
            if len(found) > MAX_R_IDS:
                break
    return found


# --- anchors -----------------------------------------------------------------------------------


def safe_path(value: str) -> str | None:
    """A repository-relative path with `/` separators, or None when unsafe."""
    path = clean_markdown(value).replace("\\", "/")
    if (
        not path
        or len(path) > MAX_PATH_CHARS
        or path.startswith("/")
        or re.match(r"[A-Za-z]:/", path)
        or any(part in ("", ".", "..") for part in path.split("/"))
    ):
        return None
    return path


Location = tuple[str, str, str | None]


def _anchor(fields: Mapping[str, str], scope: ParseScope) -> dict[str, Any] | None:
    """The snapshot-bound anchor, None without location evidence or binding; raise if malformed."""
    location = _location(fields)
    if location is None:
        return None
    side = _side(fields, scope.anchor_side)
    if not scope.base_sha or side not in SIDES:
        return None  # unbound: the whole candidate goes, before ordering and metadata checks
    path, start, end = location
    anchor: dict[str, Any] = {
        "path": path,
        "side": side,
        "startLine": int(start),
        "baseSha": scope.base_sha,
        "headSha": scope.head_sha,
    }
    if end:
        if int(end) < int(start):
            raise _Unparseable("an inverted line range")
        anchor["endLine"] = int(end)
    original = _one_path(fields, "original path", "original file")
    if original is not None:
        anchor["originalPath"] = original
    blob = fields.get("blob oid")
    if blob:
        if not _BLOB_OID.fullmatch(blob):
            raise _Unparseable("a malformed blob oid")
        anchor["blobOid"] = blob.lower()
    return anchor


def _location(fields: Mapping[str, str]) -> Location | None:
    """The primary location from `File:Line` and/or `Path`/`File` + `Line`, which must agree."""
    combined = fields.get("file:line")
    no_anchor = combined == "-"
    combined_location: Location | None = None
    if combined and not no_anchor:
        match = _LOCATION.fullmatch(combined)
        path = safe_path(match.group("path")) if match else None
        if match is None or path is None:
            raise _Unparseable("a malformed File:Line")
        combined_location = (path, match.group("start"), match.group("end"))
    path = _one_path(fields, "path", "file")
    line = fields.get("line")
    if no_anchor and (path is not None or line):
        raise _Unparseable("File:Line `-` conflicts with a location")
    separate: Location | None = None
    if path is not None or line:
        lines = _LINES.fullmatch(line) if line else None
        if path is None or lines is None:
            raise _Unparseable("a path without a line, or a malformed line")
        separate = (path, lines.group(1), lines.group(2))
    if combined_location and separate and combined_location != separate:
        raise _Unparseable("conflicting locations")
    return combined_location or separate


def _one_path(fields: Mapping[str, str], *labels: str) -> str | None:
    values = [fields[label] for label in labels if fields.get(label)]
    paths = [safe_path(value) for value in values]
    if any(path is None for path in paths) or len(set(paths)) > 1:
        raise _Unparseable(f"an unsafe or conflicting {labels[0]}")
    return paths[0] if paths else None


def _side(fields: Mapping[str, str], default: str | None) -> str | None:
    explicit = fields.get("side")
    if not explicit:
        return default
    side = explicit.strip().lower()
    if side not in SIDES or (default is not None and default != side):
        raise _Unparseable("an invalid or conflicting side")
    return side
