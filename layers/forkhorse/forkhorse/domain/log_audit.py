"""Does the log explain canonical? The rules `forkhorse verify-log` applies to one project.

Canonical's first-parent history since its import must be exactly the log's promotions, in
log order: each moved canonical from the head the one before left (the import's commit for
the first), each was preceded by its approval of that commit, and each promotion gated by
receipts (its mode, or the project's settings as the log last recorded them, says
required) was preceded by a passing, real receipt for that commit. Whatever canonical holds
that this chain does not explain is reported by commit id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from forkhorse.domain.log_entries import (
    ApprovalSubject,
    ImportSubject,
    LogEntry,
    PromotionSubject,
    ReceiptSubject,
    SettingsSubject,
)


class CanonicalHistory(Protocol):
    def tip(self) -> str | None:
        """Canonical's head commit, None while it has none."""
        ...

    def is_ancestor(self, ancestor: str, descendant: str) -> bool: ...

    def first_parent(self, since: str | None, until: str) -> list[str]:
        """`until` and its first parents, newest first, stopping before `since`."""
        ...


@dataclass(frozen=True)
class Finding:
    message: str
    index: int | None = None  # the log entry it is about
    commits: tuple[str, ...] = ()  # canonical commits the log does not explain


@dataclass
class _Gate:
    require_receipt: bool = False
    approvals: set[tuple[str, str]] = field(default_factory=set)
    passing: set[str] = field(default_factory=set)


@dataclass
class ProjectAudit:
    """The outcome for one project: which entries it read, and every finding."""

    project: str
    entries: int = 0
    promotions: int = 0
    imported: str | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def unexplained(self) -> list[str]:
        return [commit for finding in self.findings for commit in finding.commits]


def audit_project(
    project: str, entries: Iterable[tuple[int, LogEntry]], history: CanonicalHistory
) -> ProjectAudit:
    audit, gate = ProjectAudit(project), _Gate()
    head: str | None = None
    for index, entry in entries:
        if entry.project != project:
            continue
        audit.entries += 1
        subject = entry.typed_subject()
        if isinstance(subject, ImportSubject):
            head = _import(audit, index, subject, head)
        elif isinstance(subject, SettingsSubject):
            gate.require_receipt = subject.require_receipt
        elif isinstance(subject, ApprovalSubject):
            gate.approvals.add((subject.review, subject.commit))
        elif isinstance(subject, ReceiptSubject) and _passing(subject):
            gate.passing.add(subject.commit)
        elif isinstance(subject, PromotionSubject):
            head = _promotion(audit, index, subject, head, gate, history)
    _tip(audit, head, history)
    return audit


def _passing(receipt: ReceiptSubject) -> bool:
    return receipt.status == "passed" and not receipt.mocked


def _import(audit: ProjectAudit, index: int, subject: ImportSubject, head: str | None) -> str:
    if audit.imported is not None:
        audit.findings.append(Finding(f"entry {index} imports canonical a second time", index))
        return head or subject.commit
    audit.imported = subject.commit
    return subject.commit


def _promotion(
    audit: ProjectAudit,
    index: int,
    promotion: PromotionSubject,
    head: str | None,
    gate: _Gate,
    history: CanonicalHistory,
) -> str:
    audit.promotions += 1
    name = f"promotion {promotion.promotion} (entry {index})"
    if promotion.previous != head:
        between = _between(history, head, promotion.previous)
        audit.findings.append(
            Finding(
                f"{name} moved canonical from {promotion.previous}, but the log left it at "
                f"{head}: canonical changed outside the gate",
                index,
                between,
            )
        )
    elif head is not None and not history.is_ancestor(head, promotion.commit):
        audit.findings.append(
            Finding(f"{name} does not descend from canonical's previous head {head}", index)
        )
    if (promotion.review, promotion.commit) not in gate.approvals:
        audit.findings.append(
            Finding(f"{name} has no approval of {promotion.commit} before it", index)
        )
    required = promotion.mode == "required" or gate.require_receipt
    if required and promotion.commit not in gate.passing:
        audit.findings.append(
            Finding(f"{name} has no passing, real receipt for {promotion.commit} before it", index)
        )
    return promotion.commit


def _tip(audit: ProjectAudit, head: str | None, history: CanonicalHistory) -> None:
    tip = history.tip()
    if tip == head:
        return
    if tip is None:
        audit.findings.append(Finding(f"canonical has no commits, but the log leaves it at {head}"))
        return
    audit.findings.append(
        Finding(
            f"canonical's head {tip} is not where the log's last promotion or import left it "
            f"({head})",
            commits=_between(history, head, tip),
        )
    )


def _between(history: CanonicalHistory, since: str | None, until: str | None) -> tuple[str, ...]:
    """The first-parent commits up to `until` that `since` does not explain."""
    if until is None:
        return ()
    if since is not None and not history.is_ancestor(since, until):
        since = None  # rewritten: nothing on this path is explained
    return tuple(history.first_parent(since, until))
