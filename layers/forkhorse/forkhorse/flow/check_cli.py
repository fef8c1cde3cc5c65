"""`forkhorse receipt validate|findings id|findings current|gate check|gate run`: reading
and checking Flow-Next receipts (`gate run` writes the green receipt of a passing command).

Registered by `forkhorse.flow.cli.register`. Exit codes: 0 yes/valid, 1 no/invalid, 2 usage
or I/O error. `--json` prints machine output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forkhorse.flow import gate_receipts, green
from forkhorse.flow.cli_support import (
    EXIT_ERROR,
    EXIT_NO,
    EXIT_YES,
    Subparsers,
    UsageError,
    current_head,
    dirty_paths,
    emit,
    gate_arguments,
    gate_at_head,
    group,
    leaf,
)
from forkhorse.flow.currentness import Selection, select_current
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.findings import REVIEW_KINDS, canonical_order
from forkhorse.flow.history import Generation, read_generations, read_json
from forkhorse.flow.ids import finding_id


def register(subparsers: Subparsers) -> Subparsers:
    """Add the `receipt`, `findings` and `gate` command groups; the `gate` group is returned
    for the commands that write receipts."""
    receipt = group(subparsers, "receipt", "Flow-Next receipts")
    validate = leaf(
        receipt, "validate", "validate receipts (envelope, findings, criteria)", _validate
    )
    validate.add_argument("files", metavar="FILE", nargs="+", type=Path)

    findings = group(subparsers, "findings", "structured findings")
    ident = leaf(findings, "id", "print the finding id for a first-seen receipt and ordinal", _id)
    ident.add_argument("receipt_id", metavar="RECEIPT_ID")
    ident.add_argument("ordinal", metavar="ORDINAL", type=_positive_int)
    current = leaf(findings, "current", "select the current findings for a review head", _current)
    current.add_argument("--head", required=True, metavar="SHA")
    current.add_argument("--kind", required=True, choices=REVIEW_KINDS)
    current.add_argument("--backend", required=True)
    current.add_argument("files", metavar="FILE", nargs="+", type=Path)

    gate = group(subparsers, "gate", "green receipts for gate commands")
    for name, handler, text in (
        ("check", _gate_check, "is there a valid green receipt for this command at HEAD?"),
        ("run", _gate_run, "run the command unless a valid green receipt exists"),
    ):
        gate_arguments(leaf(gate, name, text, handler))
    return gate


def _positive_int(text: str) -> int:
    if not text.isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return int(text)


# --- receipt validate --------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    results = [_validate_file(path) for path in args.files]
    if args.json:
        print(json.dumps(results, sort_keys=True))
    else:
        for result in results:
            print(_describe_validation(result))
    if any(result["error"] for result in results):
        return EXIT_ERROR
    return EXIT_YES if all(result["valid"] for result in results) else EXIT_NO


def _validate_file(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"file": str(path), "valid": False, "rule": None, "pointer": None}
    result.update(message=None, error=None)
    try:
        body = read_json(path)
    except OSError as exc:
        result["error"] = str(exc)
        return result
    except ValueError as exc:
        result.update(rule="receipt.json", pointer="", message=f"not JSON: {exc}")
        return result
    violation = validate_receipt(body).violation
    if violation is None:
        result["valid"] = True
    else:
        result.update(rule=violation.rule, pointer=violation.pointer, message=violation.message)
    return result


def _describe_validation(result: dict[str, Any]) -> str:
    if result["error"]:
        return f"{result['file']}: error: {result['error']}"
    if result["valid"]:
        return f"{result['file']}: valid"
    where = result["pointer"] or "/"
    return f"{result['file']}: invalid: {result['rule']} at {where}: {result['message']}"


# --- findings id / current ---------------------------------------------------------------------


def _id(args: argparse.Namespace) -> int:
    value = finding_id(args.receipt_id, args.ordinal)
    emit(args, {"id": value}, value)
    return EXIT_YES


def _current(args: argparse.Namespace) -> int:
    generations = _load_generations(args.files)
    unreadable = [g for g in generations if g.error is not None]
    if unreadable:
        selection = Selection("unsupported", f"{unreadable[0].path}: {unreadable[0].error}")
    else:
        selection = select_current(
            [g.receipt for g in generations],
            head_sha=args.head,
            review_kind=args.kind,
            backend=args.backend,
        )
    emit(args, _selection_payload(selection), _describe_selection(selection))
    return EXIT_YES if selection.current else EXIT_NO


def _load_generations(paths: Sequence[Path]) -> list[Generation]:
    """Each file with its preserved history, every file once even if named twice."""
    unique: dict[Path, Generation] = {}
    for path in paths:
        for generation in read_generations(path):
            unique.setdefault(generation.path.resolve(), generation)
    return list(unique.values())


def _item_rows(selection: Selection) -> list[dict[str, Any]]:
    if selection.tip is None:
        return []
    keys = ("id", "ordinal", "severity", "confidence", "classification", "status")
    return [{key: item[key] for key in keys} for item in canonical_order(selection.tip["items"])]


def _selection_payload(selection: Selection) -> dict[str, Any]:
    return {
        "status": selection.status,
        "reason": selection.reason,
        "sourceReceiptId": selection.tip["sourceReceiptId"] if selection.tip else None,
        "chain": list(selection.chain),
        "stale_tips": list(selection.stale_tips),
        "rule": selection.rule,
        "pointer": selection.pointer,
        "items": _item_rows(selection),
    }


def _describe_selection(selection: Selection) -> str:
    if selection.tip is None:
        return f"{selection.status}: {selection.reason}"
    lines = [f"current {selection.tip['sourceReceiptId']}"]
    lines += [
        f"{row['id']} {row['status']} {row['severity']} {row['classification']}"
        for row in _item_rows(selection)
    ]
    return "\n".join(lines)


# --- gate check / run --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _GateState:
    root: Path
    head_sha: str
    gate_id: str
    command: str
    check: green.GreenCheck

    @property
    def receipt_file(self) -> Path:
        return self.root / green.receipt_path(self.head_sha, self.gate_id)


def _gate_check(args: argparse.Namespace) -> int:
    state = _gate_state(args)
    _report_gate(args, state, ran=False, written=False)
    return EXIT_YES if state.check.honoured else EXIT_NO


def _gate_run(args: argparse.Namespace) -> int:
    state = _gate_state(args)
    if state.check.honoured:
        _report_gate(args, state, ran=False, written=False)
        return EXIT_YES
    print(f"gate {state.gate_id}: running ({state.check.reason})", file=sys.stderr)
    passed = subprocess.run(["/bin/sh", "-c", state.command], check=False).returncode == 0
    written = passed and _write_green(state)
    _report_gate(args, state, ran=True, written=written, passed=passed)
    return EXIT_YES if passed else EXIT_NO


def _gate_state(args: argparse.Namespace) -> _GateState:
    command, root, head, dirty = gate_at_head(args)
    if dirty:
        check = green.GreenCheck(False, f"dirty tree ({dirty[0]})")
    else:
        check = _check_file(root, head, args.gate_id, command)
    return _GateState(root, head, args.gate_id, command, check)


def _check_file(root: Path, head: str, gate_id: str, command: str) -> green.GreenCheck:
    relative = green.receipt_path(head, gate_id)
    try:
        path = gate_receipts.contained_receipt_file(root, head, gate_id)
    except gate_receipts.OutsideRepository as exc:
        return green.GreenCheck(False, str(exc))
    if path.is_symlink() or not path.is_file():
        return green.GreenCheck(False, "no green receipt")
    try:
        receipt = read_json(path)
    except ValueError:
        return green.GreenCheck(False, "bad receipt")
    now = datetime.now(UTC)
    return green.check_receipt(
        receipt, head_sha=head, gate_id=gate_id, command=command, now=now, path=relative
    )


def _write_green(state: _GateState) -> bool:
    """Write the receipt unless the tree is dirty or HEAD moved while the command ran."""
    dirty = dirty_paths(state.root)
    if dirty or current_head(state.root) != state.head_sha:
        reason = f"dirty tree ({dirty[0]})" if dirty else "HEAD moved"
        print(f"gate {state.gate_id}: green receipt not written: {reason}", file=sys.stderr)
        return False
    try:
        gate_receipts.record(
            state.root,
            head_sha=state.head_sha,
            gate_id=state.gate_id,
            command=state.command,
            now=datetime.now(UTC),
        )
    except gate_receipts.OutsideRepository as exc:
        raise UsageError(f"{exc} - refusing to write") from None
    return True


def _report_gate(
    args: argparse.Namespace, state: _GateState, *, ran: bool, written: bool, passed: bool = False
) -> None:
    skipped = state.check.honoured and not ran
    skip = green.skip_line(state.gate_id, state.head_sha) if skipped else None
    if skip is not None:
        print(skip, file=sys.stderr if args.json else sys.stdout)  # a skip is always loud
    payload = {
        "gate_id": state.gate_id,
        "head_sha": state.head_sha,
        "honoured": state.check.honoured,
        "reason": state.check.reason,
        "skipped": skipped,
        "ran": ran,
        "passed": passed if ran else None,
        "written": written,
        "receipt": str(state.receipt_file),
    }
    if args.json:
        print(json.dumps(payload, sort_keys=True))
    elif not skipped:
        outcome = ("passed" if passed else "failed") if ran else "not honoured"
        print(f"gate {state.gate_id}: {outcome}: {state.check.reason}")
