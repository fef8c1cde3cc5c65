"""What the transparency log records: one entry per gate event, in the order they happened.

An entry names its project, its kind, its subject (the commit, review or promotion it is
about, and the facts an auditor checks) and the SHA-256 of the object it stands for; the
object stays where it is (the DSSE envelope of a receipt or a promotion, or the canonical
JSON of an approval, a settings or policy change or a canonical import). Entries are
canonical JSON, so one event has one entry and one leaf hash; `key` makes appends
idempotent (a retried step appends nothing twice).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from forkhorse.domain.canonical import canonical_bytes

MAX_ENTRY_BYTES = 4096  # far below a bundle's 65,535; an entry names objects, never holds them

LogKind = Literal["receipt", "approval", "promotion", "settings", "policy", "import", "key"]
DEPLOYMENT = "(deployment)"  # the project of entries about the whole deployment
_SHA256 = r"^sha256:[0-9a-f]{64}$"
_COMMIT = r"^[0-9a-f]{40}$"


class EntryRefused(ValueError):
    """Bytes that are not a log entry this version writes; the message says why."""


class _Subject(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ReceiptSubject(_Subject):
    commit: str = Field(pattern=_COMMIT)
    review: StrictStr
    record: str = Field(pattern=r"^[0-9a-f]{64}$")
    status: StrictStr  # the record's status: only "passed" lets a required promote through
    mocked: StrictBool


class ApprovalSubject(_Subject):
    commit: str = Field(pattern=_COMMIT)
    review: StrictStr
    require_receipt: StrictBool = Field(alias="requireReceipt")
    accepted_checks_change: tuple[StrictStr, ...] = Field(alias="acceptedChecksChange")


class PromotionSubject(_Subject):
    commit: str = Field(pattern=_COMMIT)
    review: StrictStr
    promotion: StrictStr
    previous: str | None = Field(pattern=_COMMIT)  # canonical's head before; None if empty
    mode: Literal["required", "advisory"]


class SettingsSubject(_Subject):
    require_receipt: StrictBool = Field(alias="requireReceipt")


class PolicySubject(_Subject):
    protect_checks: StrictBool = Field(alias="protectChecks")


class ImportSubject(_Subject):
    commit: str = Field(pattern=_COMMIT)


class KeySubject(_Subject):
    """The key that signs the log's checkpoints from this entry on (after a rotation)."""

    key_id: str = Field(alias="keyId", pattern=r"^[0-9a-f]{8}$")
    public_key: str = Field(alias="publicKey", max_length=1000)


SUBJECTS: dict[str, type[_Subject]] = {
    "receipt": ReceiptSubject,
    "approval": ApprovalSubject,
    "promotion": PromotionSubject,
    "settings": SettingsSubject,
    "policy": PolicySubject,
    "import": ImportSubject,
    "key": KeySubject,
}


class LogEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    project: str = Field(min_length=1, max_length=200)
    kind: LogKind
    subject: dict[str, Any]
    digest: str = Field(pattern=_SHA256)
    # What makes the event unique: a retried append with the same key appends nothing.
    key: str = Field(min_length=1, max_length=400)

    def typed_subject(self) -> _Subject:
        return SUBJECTS[self.kind].model_validate(self.subject)

    def to_bytes(self) -> bytes:
        data = canonical_bytes(self.model_dump())
        if len(data) > MAX_ENTRY_BYTES:
            raise EntryRefused(f"an entry is at most {MAX_ENTRY_BYTES} bytes")
        return data


def object_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def make_entry(project: str, subject: _Subject, digest: str, key: str) -> LogEntry:
    kind = next(kind for kind, model in SUBJECTS.items() if isinstance(subject, model))
    body = subject.model_dump(by_alias=True)
    return LogEntry(project=project, kind=kind, subject=body, digest=digest, key=key)  # type: ignore[arg-type]


def facts_digest(subject: _Subject) -> str:
    """The digest of an event whose object is its facts (approval, settings, import)."""
    return object_digest(canonical_bytes(subject.model_dump(by_alias=True)))


def parse_entry(data: bytes) -> LogEntry:
    """The entry these bytes are, read strictly: its canonical bytes are these bytes."""
    try:
        entry = LogEntry.model_validate(json.loads(data))
        entry.typed_subject()
    except (ValueError, ValidationError) as invalid:
        raise EntryRefused(f"not a log entry: {str(invalid).splitlines()[0]}") from invalid
    if entry.to_bytes() != data:
        raise EntryRefused("not a log entry: not in its canonical form")
    return entry


# --- the keys that make each event unique ---------------------------------------------------
def receipt_key(record_digest: str) -> str:
    return f"receipt/{record_digest}"


def approval_key(project: str, review: str, commit: str, approved_at: str) -> str:
    return f"approval/{project}/{review}/{commit}/{approved_at}"


def promotion_key(project: str, promotion: str) -> str:
    return f"promotion/{project}/{promotion}"


def change_key(kind: str, project: str, at: str) -> str:
    return f"{kind}/{project}/{at}"


def import_key(project: str) -> str:
    return f"import/{project}"


def signing_key_key(key_id: str, since_size: int) -> str:
    return f"key/{key_id}/{since_size}"
