"""Green receipts: proof that one exact command passed at one exact commit (pure logic).

A receipt lives at `.flow/tmp/green-receipts/<sha8>-<gate_id>.json` and holds
`{schema, head_sha, gate_id, command_sha256, timestamp}`. It is honoured only when the schema,
head, gate id, command fingerprint, path and age (24 h, not in the future) all match; anything
else fails closed and the gate runs. Git and file access live in the CLI.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import PurePosixPath
from typing import Any, Final

from forkhorse.flow.rules import is_int

SCHEMA: Final = 1
MAX_AGE: Final = timedelta(hours=24)
RECEIPTS_DIR: Final = PurePosixPath(".flow/tmp/green-receipts")
HONOURED: Final = "green receipt honored"
# Paths that only hold receipt state: changing them does not make the tree dirty for a gate.
RECEIPT_ONLY_PREFIXES: Final = (".flow/tasks/", ".flow/tmp/", ".flow/review-receipts/")

_GATE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")


@dataclass(frozen=True, slots=True)
class GreenCheck:
    honoured: bool
    reason: str


def is_valid_gate_id(gate_id: str) -> bool:
    return _GATE_ID.fullmatch(gate_id) is not None


def is_full_sha(sha: str) -> bool:
    """A full SHA-1 or SHA-256 object name (never an abbreviation or a ref like HEAD)."""
    return _FULL_SHA.fullmatch(sha) is not None


def command_sha256(command: str) -> str:
    """Fingerprint over the exact UTF-8 command string: no trimming, no normalisation."""
    return hashlib.sha256(command.encode("utf-8")).hexdigest()


def receipt_path(head_sha: str, gate_id: str) -> PurePosixPath:
    return RECEIPTS_DIR / f"{head_sha[:8]}-{gate_id}.json"


def is_receipt_only_state(path: str) -> bool:
    return path.startswith(RECEIPT_ONLY_PREFIXES)


def skip_line(gate_id: str, head_sha: str) -> str:
    """The loud evidence line every skip prints."""
    return f"GATE_SKIPPED:{gate_id}:green-receipt {head_sha[:8]}"


def new_receipt(*, head_sha: str, gate_id: str, command: str, now: datetime) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "head_sha": head_sha,
        "gate_id": gate_id,
        "command_sha256": command_sha256(command),
        "timestamp": utc_timestamp(now),
    }


def utc_timestamp(now: datetime) -> str:
    """ISO 8601 in UTC with a `Z` suffix, as receipts are stamped."""
    return now.astimezone(UTC).isoformat().replace("+00:00", "Z")


def check_receipt(
    receipt: object,
    *,
    head_sha: str,
    gate_id: str,
    command: str,
    now: datetime,
    path: PurePosixPath | None = None,
) -> GreenCheck:
    """Decide whether a stored receipt lets the gate skip; the reason names the first mismatch."""
    if not isinstance(receipt, Mapping):
        return GreenCheck(False, "bad receipt")
    # Strict JSON integer 1: unlike the reference, `true` and `1.0` are not a schema version.
    if not is_int(receipt.get("schema")) or receipt.get("schema") != SCHEMA:
        return GreenCheck(False, "bad schema")
    if receipt.get("head_sha") != head_sha:
        return GreenCheck(False, "HEAD mismatch")
    if receipt.get("command_sha256") != command_sha256(command):
        return GreenCheck(False, "command fingerprint mismatch")
    if path is not None and path != receipt_path(head_sha, gate_id):
        return GreenCheck(False, "path mismatch")
    age = _check_age(receipt.get("timestamp"), now)
    # The body names its gate too (the reference trusts it over the file name when it walks
    # older receipts); a receipt renamed into another gate's path is not that gate's proof.
    if age.honoured and receipt.get("gate_id") != gate_id:
        return GreenCheck(False, "gate id mismatch")
    return age


def _check_age(timestamp: object, now: datetime) -> GreenCheck:
    written = parse_timestamp(timestamp)
    if written is None:
        return GreenCheck(False, "bad receipt timestamp")
    if written > now:
        return GreenCheck(False, "receipt timestamp in the future")
    if now - written > MAX_AGE:
        return GreenCheck(False, "receipt stale (>24h)")
    return GreenCheck(True, HONOURED)


def parse_timestamp(value: object) -> datetime | None:
    """An ISO 8601 timestamp with an explicit offset (any offset, normalised to UTC)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            return None
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        return None


def dirty_paths(porcelain_z: bytes) -> list[str]:
    """Changed paths from `git status --porcelain=v1 -z`, minus receipt-only state."""
    entries = porcelain_z.decode("utf-8", "surrogateescape").split("\0")
    paths: list[str] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC" and index < len(entries):  # the source path is the next entry
            paths.append(entries[index])
            index += 1
    return [path for path in paths if not is_receipt_only_state(path)]
