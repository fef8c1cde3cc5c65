"""What `verify-log` concludes about one project (domain/log_audit.py): canonical's history
since its import must be the log's promotions, each after its approval and, where receipts
gate it, after a passing real receipt; every commit the log does not explain is named."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from forkhorse.domain.log_audit import audit_project
from forkhorse.domain.log_entries import (
    ApprovalSubject,
    ImportSubject,
    LogEntry,
    PromotionSubject,
    ReceiptSubject,
    SettingsSubject,
    facts_digest,
    make_entry,
)

P = "proj"


def c(name: str) -> str:
    return name.encode().hex().ljust(40, "0")


@dataclass
class History:
    """Canonical as a first-parent chain, oldest first."""

    chain: list[str] = field(default_factory=list)

    def tip(self) -> str | None:
        return self.chain[-1] if self.chain else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return ancestor in self.chain and descendant in self.chain and (
            self.chain.index(ancestor) <= self.chain.index(descendant))  # fmt: skip

    def first_parent(self, since: str | None, until: str) -> list[str]:
        end = self.chain.index(until)
        start = 0 if since is None else self.chain.index(since) + 1
        return list(reversed(self.chain[start : end + 1]))


def _e(subject: object, project: str = P) -> LogEntry:
    return make_entry(project, subject, facts_digest(subject), "k")  # type: ignore[arg-type]


def settings(required: bool) -> LogEntry:
    return _e(SettingsSubject(require_receipt=required))


def imported(commit: str) -> LogEntry:
    return _e(ImportSubject(commit=commit))


def receipt(commit: str, status: str = "passed", mocked: bool = False) -> LogEntry:
    return _e(
        ReceiptSubject(commit=commit, review="r", record="0" * 64, status=status, mocked=mocked)
    )


def approval(commit: str) -> LogEntry:
    return _e(
        ApprovalSubject(commit=commit, review="r", require_receipt=True, accepted_checks_change=())
    )


def promotion(
    commit: str, previous: str | None, mode: Literal["required", "advisory"] = "required"
) -> LogEntry:
    return _e(
        PromotionSubject(
            commit=commit, review="r", promotion=f"pr-{commit[:4]}", previous=previous, mode=mode
        )
    )


def _gated(commit: str, previous: str) -> list[LogEntry]:
    return [receipt(commit), approval(commit), promotion(commit, previous)]


def _audit(entries: list[LogEntry], chain: list[str]):  # type: ignore[no-untyped-def]
    return audit_project(P, enumerate(entries), History(chain))


def test_a_history_the_log_explains_has_no_finding() -> None:
    i, a, a2, b = c("i"), c("a"), c("a2"), c("b")
    other = [_e(ImportSubject(commit=c("z")), project="elsewhere")]
    log = [settings(True), imported(i), *other, *_gated(a2, i), *_gated(b, a2)]
    report = _audit(log, [i, a, a2, b])  # a came with a2's promotion
    assert report.findings == []
    assert (report.promotions, report.imported) == (2, i)
    assert report.entries == 8


def test_a_direct_push_to_canonical_is_reported_by_commit() -> None:
    i, a, x, y = c("i"), c("a"), c("x"), c("y")
    report = _audit([settings(True), imported(i), *_gated(a, i)], [i, a, x, y])
    assert report.unexplained == [y, x]
    assert "is not where the log's last promotion or import left it" in report.findings[0].message


def test_a_promotion_on_top_of_a_direct_push_still_reports_the_push() -> None:
    i, x, b = c("i"), c("x"), c("b")
    report = _audit([settings(True), imported(i), *_gated(b, x)], [i, x, b])
    assert report.unexplained == [x]
    assert "canonical changed outside the gate" in report.findings[0].message


def test_consent_and_evidence_must_come_before_the_promotion() -> None:
    i, a = c("i"), c("a")
    late = _audit([settings(True), imported(i), promotion(a, i), receipt(a), approval(a)], [i, a])
    assert [f.message.split(" has ")[1][:20] for f in late.findings] == [
        "no approval of " + a[:5],
        "no passing, real rec",
    ]


def test_only_a_passing_real_receipt_lets_a_required_promotion_through() -> None:
    i, a = c("i"), c("a")
    for bad in (receipt(a, status="failed"), receipt(a, mocked=True)):
        report = _audit([settings(True), imported(i), bad, approval(a), promotion(a, i)], [i, a])
        assert "no passing, real receipt" in report.findings[0].message
    advisory = [settings(False), imported(i), approval(a), promotion(a, i, mode="advisory")]
    assert _audit(advisory, [i, a]).findings == []


def test_an_advisory_promotion_while_the_log_says_required_is_reported() -> None:
    i, a = c("i"), c("a")
    log = [settings(True), imported(i), approval(a), promotion(a, i, mode="advisory")]
    assert "no passing, real receipt" in _audit(log, [i, a]).findings[0].message


def test_canonical_without_an_import_entry_is_all_unexplained() -> None:
    i, a = c("i"), c("a")
    report = _audit([settings(True)], [i, a])
    assert report.unexplained == [a, i]


def test_a_rewritten_canonical_reports_its_whole_history() -> None:
    i, a, r = c("i"), c("a"), c("r")
    report = _audit([settings(True), imported(i), *_gated(a, i)], [r])
    assert report.unexplained == [r]
