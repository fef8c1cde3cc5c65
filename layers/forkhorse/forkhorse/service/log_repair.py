"""Settling the log's intents after a crash: the store and the log never disagree for long.

An intent is an entry noted before its object was written. If the object is in the store as
the entry describes it, the entry is appended (a no-op if the step got there first); if the
store holds another object in its place, or none and the intent is older than any step
runs, the event never happened and the intent is dropped. Local mode settles at start, AWS
on the publisher's schedule; both report what they did.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from forkhorse.domain.log_entries import (
    EntryRefused,
    LogEntry,
    PolicySubject,
    SettingsSubject,
    object_digest,
    parse_entry,
)
from forkhorse.ports.attestations import promotion_subject, receipt_subject
from forkhorse.service.context import Context
from forkhorse.service.log_events import approval_digest

log = logging.getLogger(__name__)

# Longer than any step that writes an object (a promote job's deadline is 75 minutes).
INTENT_LIFETIME = timedelta(hours=2)
INTENTS_PER_REPAIR = 500

Verdict = Literal["written", "absent", "other"]


@dataclass
class Repair:
    appended: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)


def repair_intents(context: Context) -> Repair:
    """Settle the oldest outstanding intents (bounded per call), then publish."""
    repair = Repair()
    transparency = context.gate_log.log
    if transparency is None:
        return repair
    now = context.clock.now()
    for intent in transparency.intents(INTENTS_PER_REPAIR):
        try:
            entry = parse_entry(intent.entry)
            verdict = _object(context, entry)
        except EntryRefused:
            verdict = "other"
        if verdict == "written":
            transparency.append(entry)
            repair.appended.append(intent.key)
        elif verdict == "other" or now - intent.at > INTENT_LIFETIME:
            transparency.drop_intent(intent.key)
            repair.dropped.append(intent.key)
        else:
            repair.waiting.append(intent.key)
    if repair.appended or repair.dropped:
        log.warning("log repair: appended %s, dropped %s", repair.appended, repair.dropped)
    transparency.publish()  # and what a failed publish left uncovered
    return repair


def _object(context: Context, entry: LogEntry) -> Verdict:
    """Is the entry's object in the store as the entry describes it?"""
    subject = entry.subject
    if entry.kind == "receipt":
        return _envelope(context, receipt_subject(str(subject["record"])), entry)
    if entry.kind == "promotion":
        return _envelope(
            context, promotion_subject(entry.project, str(subject["promotion"])), entry
        )
    if entry.kind == "approval":
        return _approval(context, entry)
    if entry.kind in ("settings", "policy"):
        return _change(context, entry)
    return _import(context, entry)


def _envelope(context: Context, subject: str, entry: LogEntry) -> Verdict:
    attestor = context.attestor
    envelope = None if attestor is None else attestor.store.get_envelope(subject)
    if envelope is None:
        return "absent"
    return "written" if object_digest(envelope.encode()) == entry.digest else "other"


def _approval(context: Context, entry: LogEntry) -> Verdict:
    review = context.store.get_review(str(entry.subject["review"]))
    approval = None if review is None else review.approval
    if approval is None or approval.commit != entry.subject["commit"]:
        return "absent"
    return "written" if approval_digest(approval) == entry.digest else "other"


def _change(context: Context, entry: LogEntry) -> Verdict:
    project = context.store.get_project(entry.project)
    if project is None:
        return "absent"
    subject = entry.typed_subject()
    if isinstance(subject, SettingsSubject):
        current = project.effective_settings.require_receipt == subject.require_receipt
    else:
        assert isinstance(subject, PolicySubject)
        current = project.protects_checks == subject.protect_checks
    # The store holds this value: whether this change or an earlier one set it, logging it
    # states what the gate enforces now. A different value is a later change's, or none.
    return "written" if current else "absent"


def _import(context: Context, entry: LogEntry) -> Verdict:
    commit = str(entry.subject["commit"])
    head = context.repos(entry.project).head()
    if head is None:
        return "absent"
    if head == commit or context.is_ancestor(entry.project, commit, head):
        return "written"
    return "other"
