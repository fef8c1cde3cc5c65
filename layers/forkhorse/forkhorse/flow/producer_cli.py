"""`forkhorse review-findings|gate receipt|qa|criteria|triage-skip`: writing Flow-Next receipts.

Registered by `forkhorse.flow.cli.register`; the conventions of `cli_support`: `--json` for
machine output, exit 0 done, 1 a clean "no" (nothing written), 2 usage or I/O error (nothing
changed).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow import gate_receipts, green, producer, qa_receipt, standing, triage
from forkhorse.flow.cli_support import (
    EXIT_NO,
    EXIT_YES,
    Subparsers,
    UsageError,
    current_head,
    emit,
    gate_arguments,
    gate_at_head,
    git,
    group,
    guarded,
    leaf,
    repo_root,
)
from forkhorse.flow.envelope import validate_receipt
from forkhorse.flow.history import atomic_write_json, write_latest
from forkhorse.flow.producer import AttachError, read_bounded_json, read_bounded_text
from forkhorse.flow.rules import RuleViolation


def register(subparsers: Subparsers, gate: Subparsers) -> None:
    findings = group(subparsers, "review-findings", "attach structured findings to receipts")
    attach = leaf(
        findings, "attach", "parse reviewer prose and publish the receipt atomically", _attach
    )
    attach.add_argument("--receipt", required=True, type=Path, help="the receipt path")
    attach.add_argument("--input", required=True, type=Path, help="base receipt JSON")
    attach.add_argument("--review-file", required=True, type=Path, help="reviewer output")
    attach.add_argument("--head", required=True, help="reviewed head (a commit-ish)")
    attach.add_argument("--base", help="reviewed base (a commit-ish); anchors need it")

    gate_arguments(leaf(gate, "receipt", "record a passing gate command as a green receipt", _gate))

    qa = group(subparsers, "qa", "QA receipts (type: qa_verdict)")
    stamp = leaf(qa, "receipt", "stamp and write the QA receipt for a spec", _qa_receipt)
    stamp.add_argument("--spec", required=True, dest="spec_id", metavar="SPEC_ID")
    stamp.add_argument("--input", required=True, type=Path, help="the QA pass's receipt draft")

    skip = subparsers.add_parser(
        "triage-skip",
        help="may this diff skip a full review? (exit 0 skip, 1 review, 2 error)",
        description="Deterministic trivial-diff triage; writes a triage_skip receipt on skip.",
    )
    skip.add_argument("--json", action="store_true", help="machine-readable output")
    skip.add_argument("--base", help="base ref to diff against (default: main, else master)")
    skip.add_argument("--task", default="branch", help="receipt id (default: branch)")
    skip.add_argument("--receipt", type=Path, help="where to write the receipt on a skip")
    skip.set_defaults(func=guarded(_triage_skip))

    criteria = group(subparsers, "criteria", "standing criteria in .flow/criteria.md")
    leaf(criteria, "list", "list the configured standing criteria", _criteria_list)


def resolve_commit(ref: str) -> str:
    """A full commit id for `ref`, resolved locally."""
    value = git(Path.cwd(), "rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")
    return value.decode().strip()


# --- review-findings attach --------------------------------------------------------------------


def _attach(args: argparse.Namespace) -> int:
    try:
        receipt = read_bounded_json(args.input)
        review_text = read_bounded_text(args.review_file)
    except (ValueError, UnicodeError) as exc:
        raise UsageError(f"review-findings attach input error: {exc}") from None
    if not isinstance(receipt, dict):
        raise UsageError("review-findings attach input must be a JSON object")
    head = resolve_commit(args.head)
    base = resolve_commit(args.base) if args.base else None
    try:
        configured = standing.configured_ids(repo_root())
        result = producer.attach(
            receipt,
            review_text,
            args.receipt,
            head_sha=head,
            base_sha=base,
            configured_criteria=configured,
        )
    except (AttachError, standing.CriteriaError) as exc:
        raise UsageError(str(exc)) from None
    state = "attached" if result.findings_attached else "unsupported"
    emit(args, result.payload(), f"review findings {state}: {result.receipt_path}")
    return EXIT_YES


# --- gate receipt ------------------------------------------------------------------------------


def _gate(args: argparse.Namespace) -> int:
    command, root, head, dirty = gate_at_head(args)
    if dirty:
        message = f"worktree dirty outside the ignore set ({dirty[0]}) - receipt not warrantable"
        emit(args, {"written": False, "reason": message}, f"NO_RECEIPT: {message}")
        return EXIT_NO
    try:
        recorded = gate_receipts.record(
            root, head_sha=head, gate_id=args.gate_id, command=command, now=datetime.now(UTC)
        )
    except gate_receipts.OutsideRepository as exc:
        raise UsageError(f"{exc} - refusing to write") from None
    relative = recorded.path.relative_to(root).as_posix()
    payload = {
        "gate_id": args.gate_id,
        "head_sha": head,
        "sha8": head[:8],
        "command_sha256": recorded.receipt["command_sha256"],
        "path": relative,
        "timestamp": recorded.receipt["timestamp"],
        "pruned": list(recorded.pruned),
    }
    emit(args, payload, f"GREEN_RECEIPT: {relative}")
    return EXIT_YES


# --- qa receipt --------------------------------------------------------------------------------


def _qa_receipt(args: argparse.Namespace) -> int:
    try:
        draft = read_bounded_json(args.input)
    except (ValueError, UnicodeError) as exc:
        raise UsageError(f"qa receipt input error: {exc}") from None
    if not isinstance(draft, dict):
        raise UsageError("qa receipt input must be a JSON object")
    root = repo_root()
    branch = git(root, "branch", "--show-current").decode().strip()
    if not branch:
        raise UsageError("qa receipt needs a branch (HEAD is detached)")
    try:
        path = root / qa_receipt.receipt_path(args.spec_id)
        gate_receipts.refuse_outside(root, path.parent)
        receipt = qa_receipt.stamp(
            draft,
            spec_id=args.spec_id,
            head_sha=current_head(root),
            branch=branch,
            prior=qa_receipt.read_prior(path),
            timestamp=green.utc_timestamp(datetime.now(UTC)),
        )
        write_latest(path, receipt)
    except (qa_receipt.QaReceiptError, gate_receipts.OutsideRepository) as exc:
        raise UsageError(str(exc)) from None
    except RuleViolation as violation:
        raise UsageError(f"the QA receipt would be invalid: {violation}") from None
    relative = path.relative_to(root).as_posix()
    payload = {
        "receipt": relative,
        "verdict": receipt["verdict"],
        "qa_outcome": receipt["qa_outcome"],
        "head_sha": receipt["head_sha"],
        "branch": branch,
        "counts": receipt["counts"],
    }
    emit(args, payload, f"QA_RECEIPT: {relative} ({receipt['verdict']})")
    return EXIT_YES


# --- triage-skip -------------------------------------------------------------------------------


def _triage_skip(args: argparse.Namespace) -> int:
    root = repo_root()
    base = args.base or _default_base(root)
    listing = git(root, "diff", "--name-only", f"{base}..HEAD").decode("utf-8", "replace")
    paths = [line.strip() for line in listing.splitlines() if line.strip()]
    if len(paths) > FLOW_PRODUCER.triage_paths:
        verdict, reason = None, f"more than {FLOW_PRODUCER.triage_paths} changed files"
    else:
        verdict, reason = triage.decide(paths, lambda path: _chore_diff(root, base, path))
    if verdict is None:
        verdict, reason = triage.REVIEW, f"{reason} (no LLM, defaulting to REVIEW)"
    skipped = verdict == triage.SKIP
    payload: dict[str, Any] = {
        "verdict": "SHIP" if skipped else "REVIEW",
        "mode": "triage_skip" if skipped else "triage_review",
        "reason": reason,
        "source": "deterministic",
        "base": base,
        "changed_file_count": len(paths),
    }
    if skipped and args.receipt is not None:
        receipt = triage.skip_receipt(
            task=args.task,
            base=base,
            reason=reason,
            changed=len(paths),
            timestamp=green.utc_timestamp(datetime.now(UTC)),
        )
        validate_receipt_or_fail(receipt)
        atomic_write_json(args.receipt, receipt)
        payload["receipt"] = str(args.receipt)
    text = f"SKIP: {reason}" if skipped else f"REVIEW: {reason}"
    if "receipt" in payload:
        text += f"\nREVIEW_RECEIPT_WRITTEN: {payload['receipt']}"
    emit(args, payload, text)
    return EXIT_YES if skipped else EXIT_NO


def _default_base(root: Path) -> str:
    try:
        git(root, "rev-parse", "--verify", "--quiet", "main")
    except UsageError:
        try:
            git(root, "rev-parse", "--verify", "--quiet", "master")
        except UsageError:
            return "main"  # the diff below then fails with git's own message
        return "master"
    return "main"


def _chore_diff(root: Path, base: str, path: str) -> str | None:
    try:
        diff = git(root, "diff", "--unified=0", f"{base}..HEAD", "--", path)
    except UsageError:
        return None
    return diff.decode("utf-8", "replace") or None


def validate_receipt_or_fail(receipt: dict[str, Any]) -> None:
    violation = validate_receipt(receipt).violation
    if violation is not None:
        raise UsageError(f"the receipt would be invalid: {violation}")


# --- criteria list -----------------------------------------------------------------------------


def _criteria_list(args: argparse.Namespace) -> int:
    root = repo_root()
    try:
        entries = standing.read_criteria(root)
    except standing.CriteriaError as exc:
        raise UsageError(str(exc)) from None
    path = standing.criteria_path(root)
    payload: dict[str, Any] = {
        "criteria": entries,
        "count": len(entries),
        "path": str(path) if path.exists() else None,
    }
    lines = [f"{entry['id']}: {entry['text']}" for entry in entries]
    text = "\n".join(lines) or "no global criteria (.flow/criteria.md absent or empty)"
    if args.json:
        print(json.dumps(payload, sort_keys=True))
    else:
        print(text, file=sys.stdout)
    return EXIT_YES
