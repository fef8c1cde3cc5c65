"""Writing review receipts: build the findings generation and attach it to a receipt path.

`attach` loads the prior generation of the same type, id and mode, builds the successor
snapshot from the reviewer's prose, journals the new receipt beside the path, then publishes
it (the replaced generation is preserved in `<receipt-path>.history/` first). Every write is a
temp file, fsync and rename; a crash leaves either the old receipt or a journal that the next
attach (or `finish_pending`) completes, never a half-written receipt.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.domain.strict_json import InputRefused
from forkhorse.flow.criteria import CRITERIA_RECEIPT_TYPE, bind_criteria, parse_global_criteria
from forkhorse.flow.envelope import KIND_BY_TYPE, check_receipt
from forkhorse.flow.findings import validate_container
from forkhorse.flow.history import (
    STORED,
    HistoryConflict,
    atomic_write_json,
    check_storable,
    history_dir,
    parse_json,
    publish_latest,
    receipt_lock,
    recover_tip,
)
from forkhorse.flow.ids import source_receipt_id
from forkhorse.flow.prose import ParseScope, parse_findings
from forkhorse.flow.rules import RuleViolation

JOURNAL_SUFFIX: Final = ".journal"
# The journal wraps a receipt in `{"receipt": ...}`: one level deeper than the receipt may be.
JOURNAL_LIMITS: Final = replace(STORED, json_depth=STORED.json_depth + 1)


class AttachError(Exception):
    """The attach cannot proceed; nothing was changed (exit 2)."""


class TooLarge(ValueError):
    """A file is over its read bound; it is never read whole."""


def read_bounded_json(
    path: Path, limit: int = FLOW_PRODUCER.receipt_file_bytes, *, depth: int = STORED.json_depth
) -> Any:
    """Parse a JSON file of at most `limit` bytes with the strict reader `receipt validate` uses
    (no NaN or Infinity, no lone surrogate, nesting bounded); OSError/ValueError otherwise."""
    raw = _read_bounded(path, limit)
    try:
        return parse_json(raw, replace(STORED, body_bytes=limit, json_depth=depth))
    except InputRefused as refused:
        raise InputRefused(f"{path}: {refused}") from None  # the one line names the file


def read_bounded_text(path: Path, limit: int = FLOW_PRODUCER.review_text_bytes) -> str:
    return _read_bounded(path, limit).decode("utf-8")


def _read_bounded(path: Path, limit: int) -> bytes:
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{path} is larger than {limit} bytes")
    return data


def build_findings(
    review_text: str,
    *,
    review_type: str,
    review_id: str,
    backend: str,
    head_sha: str,
    base_sha: str | None = None,
    prior: Mapping[str, Any] | None = None,
    anchor_side: str | None = "head",
) -> dict[str, Any] | None:
    """The next findings generation after `prior` (a root when None), or None if unparseable."""
    review_kind = KIND_BY_TYPE.get(review_type)
    if review_kind is None:
        return None
    if prior is not None and (
        prior.get("reviewKind") != review_kind or prior.get("backend") != backend
    ):
        prior = None
    round_number = prior["round"] + 1 if prior is not None else 1
    source = source_receipt_id(
        review_kind=review_kind,
        review_id=review_id,
        backend=backend,
        round_number=round_number,
        head_sha=head_sha,
        review_text=review_text,
    )
    scope = ParseScope(
        source_receipt_id=source,
        review_kind=review_kind,
        backend=backend,
        round_number=round_number,
        head_sha=head_sha,
        base_sha=base_sha,
        supersedes_receipt_id=prior["sourceReceiptId"] if prior is not None else None,
        prior_findings=prior,
        anchor_side=anchor_side,
    )
    return parse_findings(review_text, scope)


def load_prior(receipt_path: Path, *, review_type: str, review_id: str, backend: str) -> Any:
    """The valid findings behind `receipt_path` for this exact scope, or None.

    With the latest file gone but history present, only a unique tip of that scope counts;
    anything else is an error, never a silent restart of the lineage.
    """
    scope = (review_type, review_id, backend)
    if not receipt_path.exists():
        folder = history_dir(receipt_path)
        entries = _count_up_to(folder, FLOW_PRODUCER.history_entries + 1) if folder.is_dir() else 0
        if entries == 0:  # the writers' lock creates the folder: empty means no history
            return None
        if entries > FLOW_PRODUCER.history_entries:
            raise AttachError(f"more than {FLOW_PRODUCER.history_entries} entries in {folder}")
        tip = recover_tip(receipt_path)
        if tip is None or _scope(tip) != scope:
            raise AttachError(f"receipt history has no unique tip for this scope: {folder}")
        return tip["findings"]
    try:
        receipt = read_bounded_json(receipt_path)
    except TooLarge as exc:
        raise AttachError(str(exc)) from None  # replacing it would mean reading it whole
    except ValueError:
        return None  # unreadable: no prior generation, as the reference treats it
    if not isinstance(receipt, Mapping) or _scope(receipt) != scope:
        return None
    findings = receipt.get("findings")
    try:
        return validate_container(findings) if findings is not None else None
    except RuleViolation:
        return None


def _count_up_to(folder: Path, ceiling: int) -> int:
    """Directory entries, counted no further than `ceiling`."""
    with os.scandir(folder) as entries:
        return sum(1 for _ in zip(entries, range(ceiling), strict=False))


def _scope(receipt: Mapping[str, Any]) -> tuple[object, object, object]:
    return receipt.get("type"), receipt.get("id"), receipt.get("mode")


@dataclass(frozen=True, slots=True)
class AttachResult:
    receipt_path: Path
    receipt: dict[str, Any]
    findings_attached: bool
    criteria_attached: bool | None

    def payload(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "success": True,
            "receipt": str(self.receipt_path),
            "findings_attached": self.findings_attached,
        }
        if self.findings_attached:
            result["source_receipt_id"] = self.receipt["findings"]["sourceReceiptId"]
        if self.criteria_attached is not None:
            result["criteria_attached"] = self.criteria_attached
        return result


def attach(
    receipt: Mapping[str, Any],
    review_text: str,
    receipt_path: Path,
    *,
    head_sha: str,
    base_sha: str | None = None,
    configured_criteria: Collection[str] | None = None,
) -> AttachResult:
    """Attach the parsed findings (and criteria) to `receipt` and publish it at `receipt_path`."""
    review_type, review_id, backend = _scope(receipt)
    if (
        review_type not in KIND_BY_TYPE
        or not isinstance(review_id, str)
        or not review_id
        or not isinstance(backend, str)
        or not backend
    ):
        raise AttachError("review-findings attach requires input type/id/mode")
    assert isinstance(review_type, str)
    try:
        text_bytes = len(review_text.encode("utf-8"))
    except UnicodeEncodeError:
        raise AttachError("review text is not valid UTF-8 (a lone surrogate)") from None
    if text_bytes > FLOW_PRODUCER.review_text_bytes:
        raise AttachError(f"review text is larger than {FLOW_PRODUCER.review_text_bytes} bytes")
    with receipt_lock(receipt_path):
        _finish_journal(receipt_path)
        prior = load_prior(
            receipt_path, review_type=review_type, review_id=review_id, backend=backend
        )
        findings = build_findings(
            review_text,
            review_type=review_type,
            review_id=review_id,
            backend=backend,
            head_sha=head_sha,
            base_sha=base_sha,
            prior=prior,
        )
        updated = dict(receipt)
        _set_or_drop(updated, "findings", findings)
        criteria_attached: bool | None = None
        if review_type == CRITERIA_RECEIPT_TYPE:
            criteria = bind_criteria(parse_global_criteria(review_text), configured_criteria or ())
            _set_or_drop(updated, "criteria", criteria)
            criteria_attached = criteria is not None
        try:
            _journal_then_publish(receipt_path, updated)
        except RuleViolation as violation:
            raise AttachError(f"the receipt would be invalid: {violation}") from None
        except HistoryConflict as exc:
            raise AttachError(str(exc)) from None
    return AttachResult(receipt_path, updated, findings is not None, criteria_attached)


def finish_pending(receipt_path: Path) -> bool:
    """Complete an attach that stopped after journaling; True when one was completed."""
    with receipt_lock(receipt_path):
        return _finish_journal(receipt_path)


def journal_path(receipt_path: Path) -> Path:
    return receipt_path.with_name(receipt_path.name + JOURNAL_SUFFIX)


def _set_or_drop(receipt: dict[str, Any], key: str, value: object) -> None:
    if value is None:
        receipt.pop(key, None)
    else:
        receipt[key] = value


def _journal_then_publish(receipt_path: Path, receipt: Mapping[str, Any]) -> None:
    check_receipt(receipt)  # an invalid receipt is never journaled,
    check_storable(receipt)  # nor one the reader would refuse
    journal = journal_path(receipt_path)
    atomic_write_json(journal, {"receipt": receipt}, JOURNAL_LIMITS)
    publish_latest(receipt_path, receipt)
    _drop_journal(journal)


def _finish_journal(receipt_path: Path) -> bool:
    journal = journal_path(receipt_path)
    if not journal.exists():
        return False
    try:
        pending = read_bounded_json(journal, depth=JOURNAL_LIMITS.json_depth)
        receipt = pending["receipt"]
        publish_latest(receipt_path, receipt)
    except (ValueError, KeyError, TypeError, RuleViolation, HistoryConflict) as exc:
        raise AttachError(f"unusable attach journal {journal}: {exc}") from None
    _drop_journal(journal)
    return True


def _drop_journal(journal: Path) -> None:
    journal.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        descriptor = os.open(journal.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
