"""Green receipts on disk: recording one, refusing a symlinked receipts directory, pruning.

`green` decides whether a receipt is honoured; this module owns the files under
`.flow/tmp/green-receipts/`. A receipts directory that resolves outside the repository (a
committed symlink at `.flow`, `.flow/tmp` or the directory itself) is refused before anything
is created, so an unattended run can never be redirected to write or trust files elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from forkhorse.domain.limits import FLOW_PRODUCER
from forkhorse.flow import green
from forkhorse.flow.history import atomic_write_json
from forkhorse.flow.producer import read_bounded_json


class OutsideRepository(Exception):
    """The receipts directory resolves outside the repository: refused (exit 2)."""


@dataclass(frozen=True, slots=True)
class Recorded:
    path: Path
    receipt: Mapping[str, Any]
    pruned: tuple[str, ...]


def contained_receipt_file(root: Path, head_sha: str, gate_id: str) -> Path:
    """The receipt path for this head and gate, refused when its directory leaves `root`."""
    path = root / green.receipt_path(head_sha, gate_id)
    refuse_outside(root, path.parent)
    return path


def refuse_outside(root: Path, folder: Path) -> None:
    """Refuse a receipts folder that resolves (through symlinks) outside the repository."""
    resolved_root = root.resolve()
    resolved = folder.resolve()
    if resolved == resolved_root or not resolved.is_relative_to(resolved_root):
        raise OutsideRepository(
            f"{folder.relative_to(root).as_posix()} resolves outside the repository "
            "(symlinked .flow path)"
        )


def record(root: Path, *, head_sha: str, gate_id: str, command: str, now: datetime) -> Recorded:
    """Write the green receipt for `command` at `head_sha` (the caller checked cleanliness)."""
    path = contained_receipt_file(root, head_sha, gate_id)
    if path.is_symlink():
        raise OutsideRepository("the green receipt file is a symlink")
    receipt = green.new_receipt(head_sha=head_sha, gate_id=gate_id, command=command, now=now)
    atomic_write_json(path, receipt)
    return Recorded(path, receipt, prune_stale(path.parent, now=now, keep=path.name))


def prune_stale(folder: Path, *, now: datetime, keep: str = "") -> tuple[str, ...]:
    """Delete receipts that can no longer be honoured (older than the 24 h age bound).

    Best effort and bounded: at most `green_dir_entries` names are looked at, only regular
    files no larger than `green_receipt_bytes` are parsed, and anything doubtful is kept.
    """
    removed: list[str] = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for seen, entry in enumerate(entries):
            if seen >= FLOW_PRODUCER.green_dir_entries:
                break
            if entry.name != keep and entry.name.endswith(".json") and _expired(entry, now):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
    return tuple(sorted(removed))


def _expired(entry: os.DirEntry[str], now: datetime) -> bool:
    try:
        info = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or info.st_size > FLOW_PRODUCER.green_receipt_bytes:
            return False
        receipt = read_bounded_json(Path(entry.path), FLOW_PRODUCER.green_receipt_bytes)
    except (OSError, ValueError, RecursionError):
        return False
    written = green.parse_timestamp(receipt.get("timestamp")) if isinstance(receipt, dict) else None
    return written is not None and now - written > green.MAX_AGE
