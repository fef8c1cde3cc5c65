"""The gate's events as log entries, appended where each happens.

Every event follows one order: its entry is noted as an intent, its object is written, then
the entry is appended (which settles the intent). A crash between the object and the
append leaves the intent, and `service.log_repair` appends it once the object is confirmed
in the store (or drops it once the object is plainly never coming). Appends are idempotent
by the entry's key, so a retried step appends nothing twice, and the promotion's entry is
preceded by its receipt's and approval's, appended again (a no-op when present) right
before it. Without a log configured every call only writes the object.
"""

from __future__ import annotations

from collections.abc import Callable
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


# --- the entry of each event ----------------------------------------------------------------
def receipt_entry(record: ReceiptRecord, digest: str, envelope: str | None) -> LogEntry:
    """A finished run's record, by its signed envelope's digest (the record's if unsigned)."""
    subject = ReceiptSubject(
        commit=record.commit,
        review=record.review_id,
        record=digest,
        status=record.status,
        mocked=is_mocked(record),
    )
    signed = f"sha256:{digest}" if envelope is None else object_digest(envelope.encode())
    return make_entry(record.project, subject, signed, receipt_key(digest))


def approval_entry(project: str, review: str, approval: Approval) -> LogEntry:
    subject = ApprovalSubject(
        commit=approval.commit,
        review=review,
        require_receipt=approval.require_receipt,
        accepted_checks_change=tuple(c.check for c in approval.accepted_checks_change),
    )
    key = approval_key(project, review, approval.commit, format_timestamp(approval.approved_at))
    return make_entry(project, subject, approval_digest(approval), key)


def approval_digest(approval: Approval) -> str:
    return object_digest(canonical_bytes(approval.model_dump(mode="json")))


def promotion_entry(promotion: Promotion, envelope: str) -> LogEntry:
    subject = PromotionSubject(
        commit=promotion.commit,
        review=promotion.review_id,
        promotion=promotion.id,
        previous=promotion.previous_head,
        mode=promotion.mode or "advisory",
    )
    key = promotion_key(promotion.project_id, promotion.id)
    return make_entry(promotion.project_id, subject, object_digest(envelope.encode()), key)


def settings_entry(project: str, settings: ProjectSettings, at: datetime) -> LogEntry:
    subject = SettingsSubject(require_receipt=settings.require_receipt)
    key = change_key("settings", project, format_timestamp(at))
    return make_entry(project, subject, facts_digest(subject), key)


def policy_entry(project: str, policy: ProjectPolicy, at: datetime) -> LogEntry:
    subject = PolicySubject(protect_checks=policy.protect_checks)
    key = change_key("policy", project, format_timestamp(at))
    return make_entry(project, subject, facts_digest(subject), key)


def import_entry(project: str, commit: str) -> LogEntry:
    subject = ImportSubject(commit=commit)
    return make_entry(project, subject, facts_digest(subject), import_key(project))


# --- appending --------------------------------------------------------------------------------
@dataclass(frozen=True)
class GateLog:
    log: TransparencyLog | None = None
    attestor: Attestor | None = None

    def earned(self, entry: LogEntry, write: Callable[[], bool]) -> bool:
        """Intent, the object's write, then the entry; no entry if the write refused."""
        if self.log is None:
            return write()
        self.log.intend(entry)
        if not write():
            self.log.drop_intent(entry.key)
            return False
        self.log.append(entry)
        return True

    def append(self, entry: LogEntry) -> int | None:
        return None if self.log is None else self.log.append(entry)

    def _envelope(self, subject: str) -> str | None:
        return None if self.attestor is None else self.attestor.store.get_envelope(subject)

    # --- signed objects: the intent is noted between signing and storing ------------------
    def intending_receipt(self, record: ReceiptRecord, digest: str) -> Callable[[str], None]:
        return lambda envelope: self._intend(receipt_entry(record, digest, envelope))

    def intending_promotion(self, promotion: Promotion) -> Callable[[str], None]:
        return lambda envelope: self._intend(promotion_entry(promotion, envelope))

    def _intend(self, entry: LogEntry) -> None:
        if self.log is not None:
            self.log.intend(entry)

    def receipt(self, record: ReceiptRecord, digest: str) -> int | None:
        """The record's entry, by the envelope stored for it (once signed, or a retry)."""
        envelope = self._envelope(receipt_subject(digest))
        return self.append(receipt_entry(record, digest, envelope))

    def promotion(self, promotion: Promotion) -> int | None:
        """A done promotion's entry, by its VSA; nothing until it is signed."""
        if promotion.state != "done":
            return None
        envelope = self._envelope(promotion_subject(promotion.project_id, promotion.id))
        return None if envelope is None else self.append(promotion_entry(promotion, envelope))

    def object_problem(self, entry: LogEntry) -> str | None:
        """What is wrong with the envelope a receipt or promotion entry names, if anything
        (the self-check's: an entry whose object is gone or is not the one logged)."""
        if entry.kind == "receipt":
            subject = receipt_subject(str(entry.subject["record"]))
        elif entry.kind == "promotion":
            subject = promotion_subject(entry.project, str(entry.subject["promotion"]))
        else:
            return None
        envelope = self._envelope(subject)
        if envelope is None:
            return None if self.attestor is None else "the store holds no envelope for it"
        if object_digest(envelope.encode()) != entry.digest:
            return "the store's envelope is not the one logged"
        return None

    def intend_import(self, project: str, commit: str) -> None:
        """Before canonical's import ref is written (git's update hook)."""
        self._intend(import_entry(project, commit))

    def imported(self, project: str, commit: str) -> int | None:
        """After it was written: canonical's first commits (the owner's import push)."""
        return self.append(import_entry(project, commit))
