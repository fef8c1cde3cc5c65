"""The deployment's transparency log: appending gate events, and reading the log back.

Every role that witnesses a gate event appends it (the finalize step its receipt, the API
approvals and settings, the promote steps their VSA, git's edge the canonical import). An
append is a conditional write on the ledger's size, retried when another append took the
index, and idempotent by the entry's key; it then asks the key's one holder to publish
(`service.log_publishing`), so every append is followed by a new signed checkpoint.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from forkhorse.domain.checkpoint import stated_checkpoint
from forkhorse.domain.log_entries import (
    DEPLOYMENT,
    KeySubject,
    LogEntry,
    facts_digest,
    make_entry,
    signing_key_key,
)
from forkhorse.domain.merkle import leaf_hash
from forkhorse.domain.tiles import (
    ENTRIES_LEVEL,
    TILE_WIDTH,
    TileRefused,
    parse_tile_path,
    tile_for,
)
from forkhorse.ports.clock import Clock
from forkhorse.ports.transparency import Intent, LogFiles, LogHead, LogLedger, LogPublisher
from forkhorse.tlog.note import NoteRefused, key_id, open_note
from forkhorse.tlog.verify import LogKey, LogRefused, TileFetcher

log = logging.getLogger(__name__)

# Each lost race means another append landed; this many in a row is contention no
# deployment of this size sees, so it is an error rather than a wait without end.
MAX_APPEND_ATTEMPTS = 64
PREFIX_ATTEMPTS = 3


class AppendContended(RuntimeError):
    """Other appends took the next index this many times in a row."""


@dataclass
class TransparencyLog:
    ledger: LogLedger
    files: LogFiles
    publisher: LogPublisher
    clock: Clock
    key: LogKey | None = None

    def append(self, entry: LogEntry) -> int:
        """The entry's index, appended now or by an earlier attempt with its key."""
        data = entry.to_bytes()
        for _ in range(MAX_APPEND_ATTEMPTS):
            head = self.ledger.head()
            appended = self.ledger.append(head.size, entry.key, data, self.clock.now())
            if appended is None:
                continue  # another append took index `head.size`
            if appended.new:
                log.info("log entry %d: %s %s", appended.index, entry.kind, entry.key)
            if appended.new or appended.index >= head.published:
                self.publisher.request()  # a retry whose first publish a crash may have lost
            return appended.index
        raise AppendContended(f"{MAX_APPEND_ATTEMPTS} appends in a row took the next index")

    def publish(self) -> None:
        """Ask for a checkpoint of whatever the ledger holds (a no-op when it is current)."""
        self.publisher.request()

    def log_key_change(self) -> int | None:
        """After the deployment's key rotated, the newest checkpoint is the old key's, which
        no verifier holding the new one accepts: logging the new key (the rotation is a
        deployment event an auditor should see) publishes a checkpoint signed with it."""
        checkpoint, key = self.checkpoint(), self.key
        if checkpoint is None or key is None or _signed_by(checkpoint, key):
            return None
        subject = KeySubject(key_id=key_id(key.public_pem).hex(), public_key=key.public_pem)
        since = self.ledger.head().published
        entry = make_entry(
            DEPLOYMENT, subject, facts_digest(subject), signing_key_key(subject.key_id, since)
        )
        log.warning("the log's key changed: logging key %s from size %d", subject.key_id, since)
        return self.append(entry)

    def intend(self, entry: LogEntry) -> None:
        self.ledger.intend(entry.key, entry.to_bytes(), self.clock.now())

    def drop_intent(self, key: str) -> None:
        self.ledger.drop_intent(key)

    def intents(self, limit: int) -> list[Intent]:
        return self.ledger.intents(limit)

    def index_of(self, key: str) -> int | None:
        return self.ledger.index_of(key)

    def head(self) -> LogHead:
        return self.ledger.head()

    def checkpoint(self) -> str | None:
        """The newest signed checkpoint (never an older one: publishing only moves forward)."""
        return self.ledger.head().checkpoint

    def status(self) -> dict[str, Any]:
        """What the console shows: the published tree and the newest self-check."""
        head = self.ledger.head()
        # The note's text (before its blank line) ends with its newline, as a body must.
        root = None if head.checkpoint is None else stated_checkpoint(head.checkpoint).root.hex()
        check = self.ledger.last_check()
        return {
            "origin": None if self.key is None else self.key.origin,
            "size": head.published,
            "root": root,
            "pending": head.size - head.published,
            "lastCheck": None if check is None else json.loads(check),
        }

    def key_body(self) -> dict[str, Any]:
        """The origin and key a verifier pins (`forkhorse verify-log --key`)."""
        if self.key is None:
            return {}
        return {
            "origin": self.key.origin,
            "publicKey": self.key.public_pem,
            "keyId": key_id(self.key.public_pem).hex(),
            "signatureType": "c2sp.org/signed-note 0x02 (ECDSA P-256, SHA-256)",
        }

    def tile(self, path: str) -> bytes | None:
        """A tile by its C2SP path; None for a path that names no tile this log has. A
        partial tile the log has grown past (deleted two publishes on) is the prefix of the
        full or the newest partial tile, served as such: a client that read an older
        checkpoint just before a burst of appends still reads its tree."""
        try:
            tile = parse_tile_path(path)
        except TileRefused:
            return None
        data = self.files.read(path)
        if data is not None or tile.full:
            return data
        for _ in range(PREFIX_ATTEMPTS):  # the newest partial may go as the log grows on
            published = self.ledger.head().published
            if not tile.in_tree(published):
                return None  # past the published tree: nothing to read for it
            try:
                return TileFetcher(self.files, 0, published).read(tile)
            except LogRefused:
                continue
        return None

    def published_entry(self, index: int) -> dict[str, Any] | None:
        """Entry `index` as the newest checkpoint's tiles hold it: its decoded JSON, its RFC
        9162 leaf hash and its bundle's tile path; None past that tree. LogRefused when the
        bundle is missing or does not hold a JSON entry there."""
        size = self.ledger.head().published
        if not 0 <= index < size:
            return None
        bundle = tile_for(ENTRIES_LEVEL, index // TILE_WIDTH, size)
        data = TileFetcher(self.files, size).entries(bundle.index)[index % TILE_WIDTH]
        try:
            decoded = json.loads(data)
        except ValueError as garbled:
            raise LogRefused(f"entry {index} in {bundle.path()} is not JSON") from garbled
        return {
            "index": index,
            "entry": decoded,
            "leafHash": leaf_hash(data).hex(),
            "bundle": bundle.path(),
        }


def _signed_by(note: str, key: LogKey) -> bool:
    try:
        open_note(note, key.origin, key.public_pem)
    except NoteRefused:
        return False
    return True
