"""Receipt history on disk: the only flow module that touches files.

Layout: `<receipt-path>` is the latest receipt; before it is replaced, its valid findings
generation (whatever its envelope says, as the reference keeps it) is kept at
`<receipt-path>.history/<sha256(sourceReceiptId)>.json`. Every write is atomic (temp file,
fsync, rename); a history entry is published without clobbering, so rewriting a generation with
different content is refused; writers of one receipt path serialise on a lock.

Every file is read by one strict reader (`parse_json`: the API's rules, so no NaN or Infinity,
no lone surrogate, bounded size and depth) and nothing is written that it would refuse
(`check_storable`): what a producer writes, `receipt validate` can read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from forkhorse.domain.limits import API_INPUT, ApiInputLimits
from forkhorse.domain.strict_json import InputRefused, check_value, parse_body
from forkhorse.flow.envelope import check_findings_binding, check_receipt
from forkhorse.flow.ids import history_name
from forkhorse.flow.rules import RuleViolation, canonical_json

HISTORY_SUFFIX = ".history"


class HistoryConflict(Exception):
    """A generation would be rewritten with different content."""


@dataclass(frozen=True, slots=True)
class Generation:
    """One receipt file: its parsed JSON, or the reason it could not be read."""

    path: Path
    receipt: object = None
    error: str | None = None


def history_dir(receipt_path: Path) -> Path:
    return receipt_path.with_name(receipt_path.name + HISTORY_SUFFIX)


def history_path(receipt_path: Path, source_receipt_id: str) -> Path:
    return history_dir(receipt_path) / history_name(source_receipt_id)


# What a receipt file may be, read or written: the API's input rules.
STORED: Final = API_INPUT


def read_json(path: Path, limits: ApiInputLimits = STORED) -> Any:
    """Parse a JSON file strictly and within the API's input bounds (no NaN or Infinity, no
    lone surrogate, bounded size and depth); OSError for I/O problems, ValueError otherwise."""
    with path.open("rb") as handle:
        raw = handle.read(limits.body_bytes + 1)
    return parse_json(raw, limits)


def parse_json(raw: bytes, limits: ApiInputLimits = STORED) -> Any:
    """The one strict reader of receipt and producer-input bytes; `InputRefused` (a ValueError
    naming the first problem) for anything the validator's reader would refuse."""
    return parse_body(raw, limits)


def check_storable(value: object, limits: ApiInputLimits = STORED) -> bytes:
    """The bytes a receipt file holds for `value`, or `RuleViolation` (rule `receipt.json`) when
    `read_json` would refuse them: a non-finite number, a lone surrogate, too deep or too large."""
    try:
        check_value(value, limits)
    except InputRefused as refused:
        raise RuleViolation("receipt.json", "", str(refused)) from None
    data = (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()
    if len(data) > limits.body_bytes:
        message = f"{len(data)} bytes, larger than the limit of {limits.body_bytes} bytes"
        raise RuleViolation("receipt.json", "", message)
    return data


def atomic_write_json(path: Path, value: object, limits: ApiInputLimits = STORED) -> None:
    """Write via a temp file in the same directory, fsync, then rename over `path`;
    `RuleViolation` (nothing written) for a value `read_json(path, limits)` would refuse."""
    data = check_storable(value, limits)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _write_temp(path.parent, data)
    try:
        temp.replace(path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_latest(receipt_path: Path, receipt: Mapping[str, Any]) -> None:
    """Make `receipt` the latest, first preserving the valid generation it replaces.

    Raises RuleViolation for an invalid receipt and HistoryConflict when a generation id would
    be reused for different content. Writing the same receipt again is a no-op.
    """
    check_receipt(receipt)
    check_storable(receipt)
    with _locked(receipt_path):
        publish_latest(receipt_path, receipt)


def receipt_lock(receipt_path: Path) -> contextlib.AbstractContextManager[None]:
    """The writers' lock of one receipt path (not re-entrant: take it once per process)."""
    return _locked(receipt_path)


def publish_latest(receipt_path: Path, receipt: Mapping[str, Any]) -> None:
    """`write_latest` for a caller that already holds `receipt_lock(receipt_path)`."""
    check_receipt(receipt)
    check_storable(receipt)
    new_source = _source_id(receipt)
    previous = _read_optional(receipt_path)
    if previous is not None and canonical_json(previous) == canonical_json(receipt):
        return
    prior_source = _valid_source_id(previous)
    if prior_source is not None:
        if prior_source == new_source:
            raise HistoryConflict(f"generation {new_source} would be rewritten")
        publish_once(history_path(receipt_path, prior_source), previous)
    if new_source is not None:
        _refuse_conflicting_history(receipt_path, new_source, receipt)
    atomic_write_json(receipt_path, receipt)


def publish_once(path: Path, value: object) -> None:
    """Create `path` with `value` unless it exists; an existing different content is a conflict."""
    data = check_storable(value)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _write_temp(path.parent, data)
    try:
        os.link(temp, path)  # fails instead of clobbering, even between concurrent writers
    except FileExistsError:
        if not _same_json(path, value):
            raise HistoryConflict(f"{path} already holds a different generation") from None
    finally:
        temp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def read_generations(receipt_path: Path) -> list[Generation]:
    """The latest receipt (if present) and every preserved generation, in a stable order.

    With the latest file missing, the history alone still holds the lineage, so its unique tip
    is what currentness selects (see `recover_tip`). A history copy identical to the latest is
    the same generation and is listed once.
    """
    generations: list[Generation] = []
    latest_bytes: bytes | None = None
    if receipt_path.exists():
        latest = _load(receipt_path)
        generations.append(latest)
        latest_bytes = canonical_json(latest.receipt) if latest.error is None else None
    folder = history_dir(receipt_path)
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            entry = _load(path)
            if entry.error is None and canonical_json(entry.receipt) == latest_bytes:
                continue
            generations.append(entry)
    if not generations:
        raise FileNotFoundError(f"no receipt at {receipt_path} and no history beside it")
    return generations


def recover_tip(receipt_path: Path) -> Mapping[str, Any] | None:
    """The unique unsuperseded valid generation in the history, or None if there is not one."""
    receipts = [g.receipt for g in _history_only(receipt_path) if g.error is None]
    valid = [r for r in receipts if _valid_source_id(r) is not None]
    superseded = {r["findings"].get("supersedesReceiptId") for r in valid}  # type: ignore[index]
    tips = [r for r in valid if _valid_source_id(r) not in superseded]
    return tips[0] if len(tips) == 1 else None  # type: ignore[return-value]


def restore_latest(receipt_path: Path) -> bool:
    """Rewrite a missing latest file from the history's unique tip; False when not possible."""
    with _locked(receipt_path):
        if receipt_path.exists():
            return False
        tip = recover_tip(receipt_path)
        if tip is None:
            return False
        atomic_write_json(receipt_path, tip)
        return True


def _history_only(receipt_path: Path) -> list[Generation]:
    folder = history_dir(receipt_path)
    return [_load(path) for path in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def _load(path: Path) -> Generation:
    try:
        return Generation(path, read_json(path))
    except ValueError as exc:
        return Generation(path, error=f"not JSON: {exc}")


def _read_optional(path: Path) -> object:
    try:
        return read_json(path)
    except FileNotFoundError:
        return None
    except ValueError:
        return None  # an unreadable latest holds no valid generation to preserve


def _source_id(receipt: Mapping[str, Any]) -> str | None:
    container = check_findings_binding(receipt)
    return None if container is None else str(container["sourceReceiptId"])


def _valid_source_id(receipt: object) -> str | None:
    """The generation id of a receipt whose findings are valid and bound to it, whatever the
    rest of its envelope says (an edited verdict does not unmake the generation a successor
    names as its parent; the reference preserves it too)."""
    if not isinstance(receipt, Mapping):
        return None
    try:
        return _source_id(receipt)
    except RuleViolation:
        return None


def _refuse_conflicting_history(
    receipt_path: Path, source: str, receipt: Mapping[str, Any]
) -> None:
    path = history_path(receipt_path, source)
    if path.exists() and not _same_json(path, receipt):
        raise HistoryConflict(f"generation {source} is already preserved with other content")


def _same_json(path: Path, value: object) -> bool:
    try:
        return canonical_json(read_json(path)) == canonical_json(value)
    except ValueError:
        return False


def _write_temp(folder: Path, data: bytes) -> Path:
    descriptor, name = tempfile.mkstemp(dir=folder, prefix=".receipt-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _fsync_dir(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class _Locked:
    """Serialise writers of one receipt path with a kernel lock on its history directory.

    A class, not `contextlib.contextmanager`: that one re-raises by assigning the exception's
    `__traceback__`, which a `RuleViolation` (a frozen, slotted dataclass) refuses with a
    TypeError, so a refusal raised under the lock would become a traceback.
    """

    def __init__(self, receipt_path: Path) -> None:
        self._folder = history_dir(receipt_path)
        self._descriptor: int | None = None

    def __enter__(self) -> None:
        self._folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self._folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except BaseException:
            os.close(descriptor)
            raise
        self._descriptor = descriptor

    def __exit__(self, *_: object) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)


def _locked(receipt_path: Path) -> _Locked:
    return _Locked(receipt_path)
