"""The gate's events as log entries, appended where each happens.

Each object is written before its entry, and every append is idempotent by the entry's key,
so a step that crashed between the two and runs again appends the missing entry once. The
promotion's entry is preceded by its receipt's and approval's, appended again (a no-op when
present) right before it, so a crash that lost either is repaired before the promotion is
logged. Without a log configured every call does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from forkhorse.attest.attestor import Attestor
from forkhorse.attest.statements import is_mocked
from forkhorse.domain.canonical import canonical_bytes
from forkhorse.domain.log_entries import (
    ApprovalSubject,
    ImportSubject,
    LogEntry,
    PolicySubject,
    PromotionSubject,
    ReceiptSubject,
    SettingsSubject,
    approval_key,
    change_key,
    facts_digest,
    import_key,
    make_entry,
    object_digest,
    promotion_key,
    receipt_key,
)
from forkhorse.domain.model import Approval, ProjectPolicy, ProjectSettings, Promotion
from forkhorse.domain.receipts import ReceiptRecord, format_timestamp
from forkhorse.ports.attestations import promotion_subject, receipt_subject
from forkhorse.service.transparency import TransparencyLog


@dataclass(frozen=True)
class GateLog:
    log: TransparencyLog | None = None
    attestor: Attestor | None = None

    def _envelope_digest(self, subject: str) -> str | None:
        envelope = None if self.attestor is None else self.attestor.store.get_envelope(subject)
        return None if envelope is None else object_digest(envelope.encode())

    def receipt(self, record: ReceiptRecord, digest: str) -> int | None:
        """A finished run's record: by its signed envelope's digest (the record's if unsigned)."""
        if self.log is None:
            return None
        signed = self._envelope_digest(receipt_subject(digest))
        subject = ReceiptSubject(
            commit=record.commit,
            review=record.review_id,
            record=digest,
            status=record.status,
            mocked=is_mocked(record),
        )
        entry = make_entry(
            record.project, subject, signed or f"sha256:{digest}", receipt_key(digest)
        )
        return self.log.append(entry)

    def approval(self, project: str, review: str, approval: Approval) -> int | None:
        if self.log is None:
            return None
        subject = ApprovalSubject(
            commit=approval.commit,
            review=review,
            require_receipt=approval.require_receipt,
            accepted_checks_change=tuple(c.check for c in approval.accepted_checks_change),
        )
        digest = object_digest(canonical_bytes(approval.model_dump(mode="json")))
        at = format_timestamp(approval.approved_at)
        key = approval_key(project, review, approval.commit, at)
        return self.log.append(make_entry(project, subject, digest, key))

    def promotion(self, promotion: Promotion) -> int | None:
        """A done promotion, by its VSA's digest; unlogged until it is signed."""
        if self.log is None or promotion.state != "done":
            return None
        signed = self._envelope_digest(promotion_subject(promotion.project_id, promotion.id))
        if signed is None:
            return None
        subject = PromotionSubject(
            commit=promotion.commit,
            review=promotion.review_id,
            promotion=promotion.id,
            previous=promotion.previous_head,
            mode=promotion.mode or "advisory",
        )
        key = promotion_key(promotion.project_id, promotion.id)
        return self.log.append(make_entry(promotion.project_id, subject, signed, key))

    def settings(self, project: str, settings: ProjectSettings, at: datetime) -> int | None:
        subject = SettingsSubject(require_receipt=settings.require_receipt)
        return self._change(project, subject, at)

    def policy(self, project: str, policy: ProjectPolicy, at: datetime) -> int | None:
        return self._change(project, PolicySubject(protect_checks=policy.protect_checks), at)

    def _change(
        self, project: str, subject: SettingsSubject | PolicySubject, at: datetime
    ) -> int | None:
        if self.log is None:
            return None
        kind = "settings" if isinstance(subject, SettingsSubject) else "policy"
        key = change_key(kind, project, format_timestamp(at))
        return self.log.append(make_entry(project, subject, facts_digest(subject), key))

    def object_problem(self, entry: LogEntry) -> str | None:
        """What is wrong with the envelope a receipt or promotion entry names, if anything
        (the self-check's: an entry whose object is gone or is not the one logged)."""
        if entry.kind == "receipt":
            subject = receipt_subject(str(entry.subject["record"]))
        elif entry.kind == "promotion":
            subject = promotion_subject(entry.project, str(entry.subject["promotion"]))
        else:
            return None
        envelope = None if self.attestor is None else self.attestor.store.get_envelope(subject)
        if envelope is None:
            return None if self.attestor is None else "the store holds no envelope for it"
        if object_digest(envelope.encode()) != entry.digest:
            return "the store's envelope is not the one logged"
        return None

    def imported(self, project: str, commit: str) -> int | None:
        """Canonical's first commits (the owner's import push)."""
        if self.log is None:
            return None
        subject = ImportSubject(commit=commit)
        entry = make_entry(project, subject, facts_digest(subject), import_key(project))
        return self.log.append(entry)
