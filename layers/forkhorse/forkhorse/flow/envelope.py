"""Receipt envelopes: type, mode and verdict, and the bindings between a receipt and its findings.

The envelope is open (receipts carry many other fields); only the fields the contract defines
are checked. A `findings` projection must match its receipt: type -> reviewKind, mode == backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from forkhorse.flow.criteria import validate_criteria
from forkhorse.flow.findings import MAX_ID_CHARS, validate_container
from forkhorse.flow.qa import QA_RECEIPT_TYPE, validate_qa
from forkhorse.flow.rules import (
    RuleViolation,
    check_enum,
    check_string,
    fail,
    require_mapping,
)

KIND_BY_TYPE: Final = {
    "plan_review": "plan",
    "impl_review": "implementation",
    "completion_review": "completion",
    "qa_verdict": "qa",
}
RECEIPT_TYPES: Final = tuple(KIND_BY_TYPE)
IMPL_RECEIPT_TYPE: Final = "impl_review"
MODES: Final = ("codex", "copilot", "cursor", "claude", "host", "triage_skip")
LEGACY_MODES: Final = ("rp",)  # written before 8.0.0; still read
VERDICTS: Final = ("SHIP", "NEEDS_WORK", "MAJOR_RETHINK", "NEEDS_HUMAN")


@dataclass(frozen=True, slots=True)
class Validation:
    """Outcome of validating a receipt: `violation` is None exactly when it is valid."""

    violation: RuleViolation | None

    @property
    def valid(self) -> bool:
        return self.violation is None


def validate_receipt(body: object) -> Validation:
    """Validate a whole receipt (envelope, findings, criteria, QA rows); never raises."""
    try:
        check_receipt(body)
    except RuleViolation as violation:
        return Validation(violation)
    return Validation(None)


def check_receipt(body: object) -> Mapping[str, Any]:
    """Raise `RuleViolation` for the first failed rule of a whole receipt."""
    receipt = require_mapping(body, "receipt.type", ())
    receipt_type = check_enum(
        receipt.get("type"), RECEIPT_TYPES, rule="receipt.type", where=("type",)
    )
    if "mode" in receipt or receipt.get("findings") is not None:
        _check_mode(receipt.get("mode"), receipt_type)
    # A QA receipt reports `qa_outcome`; the review types must state a verdict.
    if "verdict" in receipt or receipt_type != QA_RECEIPT_TYPE:
        check_enum(receipt.get("verdict"), VERDICTS, rule="receipt.verdict", where=("verdict",))
    check_findings_binding(receipt)
    validate_criteria(receipt)
    validate_qa(receipt)
    return receipt


def _check_mode(mode: object, receipt_type: str) -> None:
    """The backend list is for implementation reviews; other receipts name their producer
    (the reference's QA receipts say `ralph`), and `findings.backend` must still equal it."""
    if receipt_type == IMPL_RECEIPT_TYPE:
        check_enum(mode, MODES + LEGACY_MODES, rule="receipt.mode", where=("mode",))
    else:
        check_string(mode, rule="receipt.mode", where=("mode",), max_chars=MAX_ID_CHARS)


def check_findings_binding(
    receipt: Mapping[str, Any], *, bare: bool = False
) -> Mapping[str, Any] | None:
    """The receipt's findings container if valid and bound to it; None when absent (or null).

    A receipt must name the type and mode its projection is bound to. With `bare`, a candidate
    that omits them (currentness is handed bare `{"findings": ...}` objects) is judged by its
    container alone; a stated type or mode must still match.
    """
    findings = receipt.get("findings")
    if findings is None:
        return None
    container = validate_container(findings, ("findings",))
    if not (bare and "type" not in receipt):
        receipt_type = receipt.get("type")
        expected_kind = KIND_BY_TYPE.get(receipt_type) if isinstance(receipt_type, str) else None
        if container["reviewKind"] != expected_kind:
            raise fail(
                "binding.type-kind", ("findings", "reviewKind"), "does not match receipt type"
            )
    if not (bare and "mode" not in receipt) and receipt.get("mode") != container["backend"]:
        raise fail("binding.mode-backend", ("findings", "backend"), "does not equal receipt mode")
    return container
