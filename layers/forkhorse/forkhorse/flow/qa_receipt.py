"""Stamping a QA receipt (`type: qa_verdict`, `.flow/review-receipts/qa-<spec-id>.json`).

The live QA pass hands over its draft: `qa_outcome`, findings and one `scenarios` row per
scenario. Stamping adds the head and branch it ran on and the counts, projects `qa_outcome`
to the workflow `verdict`, and expands every `{id, run: "carried"}` row from the prior receipt
at the same path, refusing a carry from another spec or branch or of a scenario that did not
pass there, so a carried row always points at real evidence from an earlier head.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Final

from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow.producer import read_bounded_json
from forkhorse.flow.qa import QA_RECEIPT_TYPE, CarryRefused, carry_scenario, derive_coverage

# qa_outcome -> (verdict, the reason field that outcome must carry)
PROJECTION: Final = {
    "SHIP": ("SHIP", None),
    "NEEDS_WORK": ("NEEDS_WORK", None),
    "BLOCKED": ("NEEDS_WORK", "blocked_reason"),
    "NA": ("SHIP", "na_reason"),
}
RECEIPTS_DIR: Final = PurePosixPath(".flow/review-receipts")
_SPEC_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,159}")


class QaReceiptError(Exception):
    """The draft cannot become a QA receipt; nothing is written."""


def receipt_path(spec_id: str) -> PurePosixPath:
    if not _SPEC_ID.fullmatch(spec_id) or spec_id in (".", ".."):
        raise QaReceiptError(f"invalid spec id {spec_id!r}")
    return RECEIPTS_DIR / f"qa-{spec_id}.json"


def stamp(
    draft: Mapping[str, Any],
    *,
    spec_id: str,
    head_sha: str,
    branch: str,
    prior: Mapping[str, Any] | None,
    timestamp: str,
) -> dict[str, Any]:
    """The stamped receipt; QaReceiptError for a draft the contract does not allow."""
    outcome = draft.get("qa_outcome")
    if outcome not in PROJECTION:
        raise QaReceiptError(f"qa_outcome must be one of {', '.join(PROJECTION)}")
    verdict, reason_field = PROJECTION[outcome]
    for field in ("blocked_reason", "na_reason"):
        if (field in draft) != (field == reason_field):
            raise QaReceiptError(f"{field} belongs with qa_outcome {_owner(field)} only")
    if reason_field is not None and not str(draft.get(reason_field) or "").strip():
        raise QaReceiptError(f"qa_outcome {outcome} needs a non-empty {reason_field}")
    rows = _rows(draft.get("scenarios", []), prior, spec_id=spec_id, branch=branch)
    receipt = dict(draft)
    receipt.update(
        type=QA_RECEIPT_TYPE,
        id=spec_id,
        spec_id=spec_id,  # the key a later carry checks (`qa.carry_scenario`)
        verdict=verdict,
        head_sha=head_sha,
        branch=branch,
        timestamp=timestamp,
        counts=_counts(rows),
    )
    if "scenarios" in draft:
        receipt["scenarios"] = rows
        receipt.setdefault("rid_coverage", _coverage(rows))
    return receipt


def _owner(field: str) -> str:
    return next(outcome for outcome, (_, reason) in PROJECTION.items() if reason == field)


def _rows(
    value: object, prior: Mapping[str, Any] | None, *, spec_id: str, branch: str
) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise QaReceiptError("scenarios must be a list of rows")
    if len(value) > FLOW_PRODUCER.qa_scenarios:
        raise QaReceiptError(f"more than {FLOW_PRODUCER.qa_scenarios} scenarios")
    rows: list[dict[str, Any]] = []
    for row in value:
        if not isinstance(row, Mapping):
            raise QaReceiptError("a scenario row must be an object")
        if row.get("run") != "carried":
            rows.append(dict(row))
            continue
        if set(row) != {"id", "run"}:
            raise QaReceiptError("a carried row is {id, run: carried}; flowctl copies the rest")
        if prior is None:
            raise QaReceiptError(f"scenario {row['id']!r} cannot carry: no prior QA receipt")
        try:
            rows.append(carry_scenario(prior, str(row["id"]), spec_id=spec_id, branch=branch))
        except CarryRefused as exc:
            raise QaReceiptError(f"scenario {row['id']!r} cannot carry: {exc}") from None
    return rows


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    runs = Counter(str(row.get("run")) for row in rows)
    outcomes = Counter(str(row.get("outcome")) for row in rows)
    return {
        "scenarios": len(rows),
        "live": runs["live"],
        "carried": runs["carried"],
        "pass": outcomes["PASS"],
        "fail": outcomes["FAIL"],
        "blocked": outcomes["BLOCKED"],
    }


def _coverage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The reference's shape: every R-ID's coverage, and how many have a scenario at all."""
    r_ids = sorted({r for row in rows for r in row.get("rids") or () if isinstance(r, str)})
    entries = [{"id": r_id, "coverage": derive_coverage(r_id, rows)} for r_id in r_ids]
    covered = sum(entry["coverage"] != "no_live_scenario" for entry in entries)
    return {"covered": covered, "total": len(entries), "rids": entries}


def read_prior(path: Path) -> Mapping[str, Any] | None:
    """The receipt a carry reads from: the current QA receipt at the same path, if any."""
    if not path.exists():
        return None
    try:
        prior = read_bounded_json(path)
    except ValueError as exc:
        raise QaReceiptError(f"unreadable prior QA receipt {path}: {exc}") from None
    return prior if isinstance(prior, Mapping) else None
