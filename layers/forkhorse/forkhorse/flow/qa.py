"""QA receipts (`type: qa_verdict`): scenario rows, R-ID coverage and scenario carries.

The contract names the row shapes and coverage values but not every receipt-level key, so this
module follows what the reference writes: rows live in `scenarios`, coverage in `rid_coverage`
as `{covered, total, rids: [{id, coverage}]}`, and the prior receipt a carry reads from states
`spec_id`, `branch` and `head_sha`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from forkhorse.flow.rules import (
    R_ID_PATTERN,
    Where,
    check_closed_keys,
    check_enum,
    check_string,
    child,
    fail,
    is_int,
    require_list,
    require_mapping,
)

QA_RECEIPT_TYPE: Final = "qa_verdict"
OUTCOMES: Final = ("PASS", "FAIL", "BLOCKED")
RUNS: Final = ("live", "carried")
COVERAGE_VALUES: Final = ("live", "subtracted", "carried", "no_live_scenario", "backend_cli")
MAX_SCENARIO_ID_CHARS: Final = 160
MAX_EVIDENCE_PATH_CHARS: Final = 1024

_LIVE_KEYS: Final = frozenset({"id", "rids", "outcome", "run", "evidence"})
_CARRIED_REQUIRED: Final = frozenset({"id", "run"})
_CARRIED_OPTIONAL: Final = frozenset({"rids", "outcome", "evidence", "head_sha"})
_COVERAGE_KEYS: Final = frozenset({"covered", "total", "rids"})


class CarryRefused(Exception):
    """A scenario cannot carry: another spec or branch, or it did not pass there."""


def validate_qa(receipt: Mapping[str, Any], where: Where = ()) -> None:
    """Check `scenarios` rows and `rid_coverage` when present (only on qa_verdict receipts)."""
    for key in ("scenarios", "rid_coverage"):
        if key in receipt and receipt.get("type") != QA_RECEIPT_TYPE:
            raise fail("qa.receipt-type", child(where, key), "only on qa_verdict")
    rows: list[Mapping[str, Any]] = []
    if "scenarios" in receipt:
        rows = _check_rows(receipt["scenarios"], child(where, "scenarios"))
    if "rid_coverage" in receipt:
        _check_coverage(receipt["rid_coverage"], rows, child(where, "rid_coverage"))


def derive_coverage(r_id: str, rows: Iterable[Mapping[str, Any]]) -> str:
    """`carried` only when every scenario of the R-ID carried; `live` when any ran at this head."""
    runs = {row.get("run") for row in rows if r_id in (row.get("rids") or ())}
    if not runs:
        return "no_live_scenario"
    return "carried" if runs == {"carried"} else "live"


def carry_scenario(
    prior_receipt: Mapping[str, Any], scenario_id: str, *, spec_id: str, branch: str
) -> dict[str, Any]:
    """The carried row for `scenario_id`, copied from a prior receipt of this spec and branch."""
    if prior_receipt.get("type") != QA_RECEIPT_TYPE:
        raise CarryRefused("prior receipt is not a qa_verdict")
    if prior_receipt.get("spec_id") != spec_id:
        raise CarryRefused("prior receipt is for another spec")
    if prior_receipt.get("branch") != branch:
        raise CarryRefused("prior receipt is for another branch")
    prior_rows = prior_receipt.get("scenarios")
    row = next(
        (r for r in prior_rows or () if isinstance(r, Mapping) and r.get("id") == scenario_id),
        None,
    )
    if row is None:
        raise CarryRefused("scenario absent from the prior receipt")
    if row.get("outcome") != "PASS":
        raise CarryRefused("scenario did not pass on the prior receipt")
    # A row carried twice keeps pointing at the head where it was really driven.
    original_head = row.get("head_sha") if row.get("run") == "carried" else None
    return {
        "id": scenario_id,
        "run": "carried",
        "outcome": "PASS",
        "rids": list(row.get("rids") or []),
        "evidence": list(row.get("evidence") or []),
        "head_sha": original_head or prior_receipt.get("head_sha"),
    }


def _check_rows(value: object, where: Where) -> list[Mapping[str, Any]]:
    rows = [
        _check_row(row, child(where, index))
        for index, row in enumerate(require_list(value, "qa.scenarios", where))
    ]
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if row["id"] in seen:
            raise fail("qa.scenario-unique", child(where, index, "id"), "duplicate id")
        seen.add(row["id"])
    return rows


def _check_row(value: object, where: Where) -> Mapping[str, Any]:
    row = require_mapping(value, "qa.scenario", where)
    run = check_enum(row.get("run"), RUNS, rule="qa.run", where=child(where, "run"))
    if run == "live":
        check_closed_keys(
            row, required=_LIVE_KEYS, optional=frozenset(), rule_prefix="qa", where=where
        )
    else:
        check_closed_keys(
            row,
            required=_CARRIED_REQUIRED,
            optional=_CARRIED_OPTIONAL,
            rule_prefix="qa",
            where=where,
        )
    check_string(
        row["id"], rule="qa.scenario-id", where=child(where, "id"), max_chars=MAX_SCENARIO_ID_CHARS
    )
    if "outcome" in row:
        allowed = OUTCOMES if run == "live" else ("PASS",)
        check_enum(row["outcome"], allowed, rule="qa.outcome", where=child(where, "outcome"))
    if "rids" in row:
        _check_rids(row["rids"], child(where, "rids"))
    if "evidence" in row:
        for index, path in enumerate(
            require_list(row["evidence"], "qa.evidence", child(where, "evidence"))
        ):
            check_string(
                path,
                rule="qa.evidence",
                where=child(where, "evidence", index),
                max_chars=MAX_EVIDENCE_PATH_CHARS,
            )
    return row


def _check_rids(value: object, where: Where) -> None:
    r_ids = require_list(value, "qa.rids", where)
    for index, r_id in enumerate(r_ids):
        if not isinstance(r_id, str) or not R_ID_PATTERN.fullmatch(r_id):
            raise fail("qa.rids", child(where, index), "must match R<digits>")
    if len(set(r_ids)) != len(r_ids):
        raise fail("qa.rids", where, "duplicate R-ID")


def _check_coverage(value: object, rows: list[Mapping[str, Any]], where: Where) -> None:
    coverage = require_mapping(value, "qa.coverage", where)
    check_closed_keys(
        coverage,
        required=_COVERAGE_KEYS,
        optional=frozenset(),
        rule_prefix="qa.coverage",
        where=where,
    )
    for key in ("covered", "total"):
        if not is_int(coverage[key]) or coverage[key] < 0:
            raise fail("qa.coverage-count", child(where, key), "must be a non-negative integer")
    if coverage["covered"] > coverage["total"]:
        raise fail("qa.coverage-count", child(where, "covered"), "more than total")
    rids_where = child(where, "rids")
    seen: set[str] = set()
    for index, entry in enumerate(require_list(coverage["rids"], "qa.coverage", rids_where)):
        r_id = _check_coverage_row(entry, rows, child(rids_where, index))
        if r_id in seen:
            raise fail("qa.coverage-rid", child(rids_where, index, "id"), "duplicate R-ID")
        seen.add(r_id)


def _check_coverage_row(value: object, rows: list[Mapping[str, Any]], where: Where) -> str:
    entry = require_mapping(value, "qa.coverage", where)
    check_closed_keys(
        entry,
        required=frozenset({"id", "coverage"}),
        optional=frozenset(),
        rule_prefix="qa.coverage",
        where=where,
    )
    r_id = entry["id"]
    if not isinstance(r_id, str) or not R_ID_PATTERN.fullmatch(r_id):
        raise fail("qa.coverage-rid", child(where, "id"), "must match R<digits>")
    recorded = check_enum(
        entry["coverage"], COVERAGE_VALUES, rule="qa.coverage", where=child(where, "coverage")
    )
    derived = derive_coverage(r_id, rows)
    if recorded in ("live", "carried") and rows and recorded != derived:
        raise fail("qa.coverage-carried", child(where, "coverage"), f"scenarios say {derived}")
    return r_id
