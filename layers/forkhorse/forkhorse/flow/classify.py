"""Service-side classification of one receipt against a review head (pure, JSON-ready output).

`classify_receipt` answers what an API response and an owner's console need: is the receipt
valid (and if not, which rule failed where), its type/mode/verdict, whether its structured
findings are current, stale, unsupported, ambiguous or absent for the head, and its items
grouped by severity and split into introduced vs pre-existing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypedDict

from forkhorse.flow.criteria import CRITERIA_RECEIPT_TYPE
from forkhorse.flow.currentness import Selection, Status, select_current
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.findings import SEVERITIES, canonical_order
from forkhorse.flow.rules import canonical_json, is_int

_ITEM_SUMMARY_KEYS = (
    "id",
    "ordinal",
    "severity",
    "confidence",
    "classification",
    "status",
    "title",
    "rIds",
    "priorFindingId",
    "anchor",
)


# The current-findings selection for a receipt's reviewKind and backend.
Selector = Callable[[Mapping[str, Any], str, str], Selection]


class SeverityGroup(TypedDict):
    severity: str
    introduced: list[dict[str, Any]]
    pre_existing: list[dict[str, Any]]


class Envelope(TypedDict):
    """What the receipt says about itself, shown even when it is invalid."""

    type: str | None
    mode: str | None
    verdict: str | None
    sourceReceiptId: str | None
    supersedesReceiptId: str | None
    reviewKind: str | None
    backend: str | None
    round: int | None
    headSha: str | None
    criteria: list[Any] | None


class Classification(Envelope):
    valid: bool
    rule: str | None
    pointer: str | None
    message: str | None
    findings: Status
    reason: str
    tip: str | None
    groups: list[SeverityGroup]


def classify_receipt(body: object, head_sha: str, lineage: Iterable[object] = ()) -> Classification:
    """Classify `body` against `head_sha`, given the other stored receipts of the same review.

    `lineage` may include `body` itself; an identical copy is not counted twice. Invalid receipts
    (which a service must refuse with the rule and pointer) report `findings` as unsupported when
    they carry a findings field and absent otherwise. Never raises on JSON-like input.
    """

    def select(receipt: Mapping[str, Any], review_kind: str, backend: str) -> Selection:
        return select_current(
            [*_others(receipt, lineage), receipt],
            head_sha=head_sha,
            review_kind=review_kind,
            backend=backend,
        )

    return _classify(body, head_sha, select)


def classify_lineage(receipts: Sequence[object], head_sha: str) -> list[Classification]:
    """Classify each of one review's distinct receipts against all of them, as
    `classify_receipt(r, head_sha, receipts)` would, but compute each (reviewKind, backend)
    selection once for the whole set instead of once per receipt."""

    @functools.cache
    def shared(review_kind: str, backend: str) -> Selection:
        return select_current(receipts, head_sha=head_sha, review_kind=review_kind, backend=backend)

    return [
        _classify(body, head_sha, lambda _, kind, backend: shared(kind, backend))
        for body in receipts
    ]


def _classify(body: object, head_sha: str, select: Selector) -> Classification:
    validation = validate_receipt(body)
    receipt: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    envelope = _envelope(receipt)
    violation = validation.violation
    if violation is not None:
        envelope["criteria"] = None  # only validated criteria are shown
        return Classification(
            **envelope,
            valid=False,
            rule=violation.rule,
            pointer=violation.pointer,
            message=violation.message,
            findings="unsupported" if receipt.get("findings") is not None else "absent",
            reason="invalid receipt",
            tip=None,
            groups=[],
        )
    container = receipt.get("findings")
    if container is None:
        return Classification(
            **envelope,
            valid=True,
            rule=None,
            pointer=None,
            message=None,
            findings="absent",
            reason="no structured findings; use the verdict and prose",
            tip=None,
            groups=[],
        )
    selection = select(receipt, container["reviewKind"], container["backend"])
    status, reason = _status_for(container, head_sha, selection)
    unsupported = status == "unsupported"
    return Classification(
        **envelope,
        valid=True,
        rule=selection.rule if unsupported else None,
        pointer=selection.pointer if unsupported else None,
        message=None,
        findings=status,
        reason=reason,
        tip=selection.tip["sourceReceiptId"] if selection.tip is not None else None,
        groups=_groups(container["items"]),
    )


def _status_for(
    container: Mapping[str, Any], head_sha: str, selection: Selection
) -> tuple[Status, str]:
    if selection.status == "unsupported":
        return "unsupported", selection.reason
    if container["headSha"] != head_sha:
        return "stale", "bound to another head"
    if selection.status == "current":
        if (
            selection.tip is not None
            and selection.tip["sourceReceiptId"] == container["sourceReceiptId"]
        ):
            return "current", selection.reason
        return "stale", "superseded by a later generation"
    if selection.status == "stale":
        return "stale", "superseded by a tip at another head"
    return selection.status, selection.reason


def _others(receipt: Mapping[str, Any], lineage: Iterable[object]) -> list[object]:
    own = _canonical_or_none(receipt)
    return [other for other in lineage if own is None or _canonical_or_none(other) != own]


def _canonical_or_none(value: object) -> bytes | None:
    try:
        return canonical_json(value)
    except (TypeError, ValueError, RecursionError):
        return None


def _envelope(receipt: Mapping[str, Any]) -> Envelope:
    found = receipt.get("findings")
    container: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    criteria = receipt.get("criteria")
    shows_criteria = receipt.get("type") == CRITERIA_RECEIPT_TYPE and isinstance(criteria, list)
    return Envelope(
        type=_text(receipt.get("type")),
        mode=_text(receipt.get("mode")),
        verdict=_text(receipt.get("verdict")),
        sourceReceiptId=_text(container.get("sourceReceiptId")),
        supersedesReceiptId=_text(container.get("supersedesReceiptId")),
        reviewKind=_text(container.get("reviewKind")),
        backend=_text(container.get("backend")),
        round=container["round"] if is_int(container.get("round")) else None,
        headSha=_text(container.get("headSha")),
        criteria=criteria if shows_criteria else None,
    )


def _groups(items: list[Mapping[str, Any]]) -> list[SeverityGroup]:
    groups = [SeverityGroup(severity=s, introduced=[], pre_existing=[]) for s in SEVERITIES]
    for item in canonical_order(items):
        group = groups[SEVERITIES.index(item["severity"])]
        summary = {key: item[key] for key in _ITEM_SUMMARY_KEYS if key in item}
        if item["classification"] == "introduced":
            group["introduced"].append(summary)
        else:
            group["pre_existing"].append(summary)
    return groups


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
