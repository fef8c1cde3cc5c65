"""Builders for valid Flow-Next receipts and lineages, shared by the flow tests and benchmark."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forkhorse.flow.ids import finding_id

BASE = "a" * 40
HEAD = "b" * 40
OTHER_HEAD = "c" * 40
RunCli = Callable[..., int]
VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "flow-next"


def load_vectors(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def item(
    first_seen: str,
    ordinal: int,
    source: str | None = None,
    *,
    severity: str = "P2",
    confidence: int = 75,
    classification: str = "introduced",
    status: str = "open",
    anchored: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": finding_id(first_seen, ordinal),
        "ordinal": ordinal,
        "severity": severity,
        "confidence": confidence,
        "classification": classification,
        "status": status,
        "title": f"Finding {ordinal}",
        "body": f"Finding {ordinal} explained.",
        "rIds": [],
        "firstSeenReceiptId": first_seen,
        "lastSeenReceiptId": source or first_seen,
    }
    if anchored:
        value["anchor"] = {
            "path": "src/a.py",
            "side": "head",
            "startLine": 10,
            "endLine": 12,
            "baseSha": BASE,
            "headSha": HEAD,
        }
    value.update(extra)
    return value


def container(
    source: str,
    items: list[dict[str, Any]] | None = None,
    *,
    round_number: int = 1,
    supersedes: str | None = None,
    head: str = HEAD,
    kind: str = "implementation",
    backend: str = "codex",
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "schemaVersion": 1,
        "sourceReceiptId": source,
        "reviewKind": kind,
        "backend": backend,
        "round": round_number,
        "baseSha": BASE,
        "headSha": head,
        "items": items if items is not None else [],
    }
    if supersedes is not None:
        value["supersedesReceiptId"] = supersedes
    return value


def root(source: str, count: int, **kwargs: Any) -> dict[str, Any]:
    return container(source, [item(source, n) for n in range(1, count + 1)], **kwargs)


def successor(
    parent: dict[str, Any],
    source: str,
    *,
    new: int = 0,
    head: str = HEAD,
    status: str = "not_fixed",
) -> dict[str, Any]:
    """A complete snapshot: every parent item carried (lastSeen advanced), plus `new` items."""
    carried = []
    for previous in parent["items"]:
        carried_item = copy.deepcopy(previous)
        carried_item["lastSeenReceiptId"] = source
        carried_item["status"] = status
        carried_item.pop("anchor", None)  # a carried anchor without fresh evidence is dropped
        carried.append(carried_item)
    start = max((i["ordinal"] for i in parent["items"]), default=0) + 1
    fresh = [item(source, n) for n in range(start, start + new)]
    return container(
        source,
        carried + fresh,
        round_number=parent["round"] + 1,
        supersedes=parent["sourceReceiptId"],
        head=head,
        kind=parent["reviewKind"],
        backend=parent["backend"],
    )


def chain(generations: int, items: int, *, prefix: str = "gen") -> list[dict[str, Any]]:
    """A linear lineage of `generations` containers, each holding `items` findings."""
    containers = [root(f"{prefix}-1", items)]
    for number in range(2, generations + 1):
        containers.append(successor(containers[-1], f"{prefix}-{number}"))
    return containers


def receipt(findings: dict[str, Any] | None, **envelope: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"type": "impl_review", "id": "fn-1.1", "mode": "codex"}
    value["verdict"] = "NEEDS_WORK"
    value.update(envelope)
    if findings is not None:
        value["findings"] = findings
    return value


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
