"""Signed envelopes, by what they attest, and the public keys that ever signed one.

Apart from the Store: an envelope is written once (put-if-absent) beside the record or
promotion it attests, and the key registry only grows, so rotated keys stay listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


def receipt_subject(record_digest: str) -> str:
    return f"receipt/{record_digest}"


def promotion_subject(project_id: str, promotion_id: str) -> str:
    return f"promotion/{project_id}/{promotion_id}"


@dataclass(frozen=True)
class RegisteredKey:
    keyid: str
    public_key: str  # the securesystemslib key's JSON (keytype, scheme, keyval)
    since: datetime  # when it first signed, or was installed


class AttestationStore(Protocol):
    def put_envelope(self, subject: str, envelope: str, now: datetime) -> bool:
        """Store `envelope` (JSON) for `subject` unless one is there; True if stored."""
        ...

    def get_envelope(self, subject: str) -> str | None: ...

    def register_key(self, keyid: str, public_key: str, now: datetime) -> bool:
        """Add a public key to the registry unless listed; True if added."""
        ...

    def list_keys(self) -> list[RegisteredKey]:
        """Every registered key, oldest first."""
        ...

    def close(self) -> None: ...
