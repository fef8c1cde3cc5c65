"""Publishing the log: tiles for what the ledger holds, then a checkpoint signed with the
deployment's key, and the log's self-check.

Only the key's holder publishes (in process locally; the publisher function on AWS, one at
a time). Tiles are derived from the ledger and written before the checkpoint that needs
them, so a crash anywhere leaves at worst tiles no checkpoint names yet, rewritten alike on
the next publish. The checkpoint only moves forward (a conditional write on the published
size). Partial tiles two checkpoints old are deleted; the tlog-tiles spec lets a client
fall back to the full or a wider tile.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from forkhorse.domain.checkpoint import Checkpoint
from forkhorse.domain.log_entries import EntryRefused, LogEntry, parse_entry
from forkhorse.domain.merkle import leaf_hash
from forkhorse.domain.receipts import format_timestamp
from forkhorse.domain.tiles import (
    ENTRIES_LEVEL,
    TILE_HEIGHT,
    TILE_WIDTH,
    Tile,
    TreeReader,
    entry_bundle,
    hash_tile,
    parent_hash,
    split_hash_tile,
    tile_for,
    tiles_of,
)
from forkhorse.ports.clock import Clock
from forkhorse.ports.signer import EvidenceSigner
from forkhorse.ports.transparency import LogFiles, LogHead, LogLedger
from forkhorse.tlog.note import sign_note
from forkhorse.tlog.verify import (
    CHECKPOINT_PATH,
    LogKey,
    LogRefused,
    TileFetcher,
    check_append_only,
    check_tiles,
    fetch_checkpoint,
)

log = logging.getLogger(__name__)

ObjectCheck = Callable[[LogEntry], str | None]
"""What is wrong with the object an entry names (missing, another digest), or None."""


class LedgerBroken(RuntimeError):
    """The ledger does not hold the entries its head counts."""


@dataclass
class _Building:
    """Tiles built in this publish, so later tiles and the root read them from memory."""

    ledger: LogLedger
    files: LogFiles
    size: int
    published: int
    built: dict[str, bytes] = field(default_factory=dict)
    entries: dict[int, list[bytes]] = field(default_factory=dict)

    def data(self, tile: Tile) -> bytes:
        path = tile.path()
        if path not in self.built:
            self.built[path] = self._build(tile)
        return self.built[path]

    def read(self, tile: Tile) -> bytes | None:
        return self.built.get(tile.path()) or self.files.read(tile.path())

    def _build(self, tile: Tile) -> bytes:
        if tile.level == ENTRIES_LEVEL:
            return entry_bundle(self._entries(tile.index, tile.width))
        if tile.level == 0:
            return hash_tile([leaf_hash(e) for e in self._entries(tile.index, tile.width)])
        return hash_tile(self._parents(tile))

    def _entries(self, index: int, width: int) -> list[bytes]:
        if index not in self.entries:
            start = index * TILE_WIDTH
            found = self.ledger.entries(start, start + width)
            if len(found) != width:
                raise LedgerBroken(f"the ledger lacks entry {start + len(found)}")
            self.entries[index] = found
        return self.entries[index]

    def _parents(self, tile: Tile) -> list[bytes]:
        """The hashes of a level >= 1 tile: kept from its previous width, the rest new."""
        before = tile_for(tile.level, tile.index, self.published) if self._had(tile) else None
        kept: list[bytes] = []
        if before is not None:
            data = self.read(before)
            kept = [] if data is None else split_hash_tile(before, data)
        first = tile.index * TILE_WIDTH
        return kept + [
            parent_hash(self.hashes(Tile(tile.level - 1, first + at, TILE_WIDTH)))
            for at in range(len(kept), tile.width)
        ]

    def _had(self, tile: Tile) -> bool:
        return (self.published >> (TILE_HEIGHT * tile.level)) > tile.index * TILE_WIDTH

    def hashes(self, tile: Tile) -> list[bytes]:
        data = self.read(tile)
        return split_hash_tile(tile, self.data(tile) if data is None else data)


@dataclass
class LogPublishing:
    ledger: LogLedger
    files: LogFiles
    key: LogKey
    signer: EvidenceSigner
    clock: Clock

    def publish(self) -> LogHead:
        """Tiles and a signed checkpoint for everything the ledger holds."""
        head = self.ledger.head()
        if head.size == head.published and head.checkpoint is not None:
            self._heal(head, head.checkpoint)
            return head
        building = _Building(self.ledger, self.files, head.size, head.published)
        for tile in tiles_of(head.size, head.published):
            self.files.write(tile.path(), building.data(tile))
        tree = TreeReader(head.size, building.hashes)
        note = sign_note(
            Checkpoint(self.key.origin, head.size, tree.root()).body(), self.key.origin, self.signer
        )
        if self.ledger.publish(head.published, head.size, note):
            self.files.write(CHECKPOINT_PATH, note.encode())
            self._drop_partials(head, head.size)
            log.info("published the log's checkpoint at size %d", head.size)
        return self.ledger.head()

    def _heal(self, head: LogHead, checkpoint: str) -> None:
        """What a crash or a power loss took from the files the newest checkpoint names: its
        own file, and the tiles its publish wrote (rebuilt from the ledger, byte for byte)."""
        if self.files.read(CHECKPOINT_PATH) != checkpoint.encode():
            self.files.write(CHECKPOINT_PATH, checkpoint.encode())
        building = _Building(self.ledger, self.files, head.published, head.previous)
        for tile in tiles_of(head.published, head.previous):
            if self.files.read(tile.path()) is None:
                log.warning("rewrote the log's missing %s", tile.path())
                self.files.write(tile.path(), building.data(tile))

    def _drop_partials(self, head: LogHead, size: int) -> None:
        stale = _partials(head.previous) - _partials(head.published) - _partials(size)
        for tile in stale:
            self.files.delete(tile.path())


def _partials(size: int) -> set[Tile]:
    """The partial tiles of the tree of `size`: the right edge of each level."""
    tiles, level = set(), ENTRIES_LEVEL
    while (count := size >> (TILE_HEIGHT * max(level, 0))) > 0:
        if count % TILE_WIDTH:
            tiles.add(tile_for(level, count // TILE_WIDTH, size))
        level += 1
    return tiles


# --- the self-check ---------------------------------------------------------------------------
@dataclass
class _FilesSource:
    files: LogFiles

    def read(self, path: str) -> bytes | None:
        return self.files.read(path)


@dataclass
class LogSelfCheck:
    """What an auditor would find, run by the deployment on itself: the newest checkpoint
    verifies, its tiles hash to its root, it appends to the tree last checked, and every
    entry since then is the ledger's row and names an object the store holds as logged."""

    ledger: LogLedger
    files: LogFiles
    key: LogKey
    clock: Clock
    objects: ObjectCheck | None = None

    def run(self, full: bool = False) -> dict[str, Any]:
        previous = None if full else self._previous()
        problems: list[str] = []
        checkpoint = None
        try:
            checkpoint, _ = fetch_checkpoint(_FilesSource(self.files), self.key)
            problems += self._tree(checkpoint, previous)
        except LogRefused as refused:
            problems.append(str(refused))
        report = {
            "at": format_timestamp(self.clock.now()),
            "size": None if checkpoint is None else checkpoint.size,
            "root": None if checkpoint is None else checkpoint.root.hex(),
            "ledgerSize": self.ledger.head().size,
            "ok": not problems,
            "problems": problems[:50],
        }
        if problems:
            log.error("the log's self-check found %d problem(s): %s", len(problems), problems[0])
        self.ledger.record_check(json.dumps(report, sort_keys=True))
        return report

    def _previous(self) -> Checkpoint | None:
        text = self.ledger.last_check()
        report = None if text is None else json.loads(text)
        if not report or not report.get("ok") or report.get("size") is None:
            return None
        return Checkpoint(self.key.origin, report["size"], bytes.fromhex(report["root"]))

    def _tree(self, checkpoint: Checkpoint, previous: Checkpoint | None) -> list[str]:
        source = _FilesSource(self.files)
        check_tiles(TileFetcher(source, checkpoint.size), checkpoint)
        if previous is not None:
            check_append_only(source, previous, checkpoint)
        start = 0 if previous is None else previous.size
        return self._entries(TileFetcher(source, checkpoint.size), start, checkpoint.size)

    def _entries(self, fetcher: TileFetcher, start: int, size: int) -> list[str]:
        problems: list[str] = []
        reader = fetcher.reader()
        for tile_index in range(start // TILE_WIDTH, -(-size // TILE_WIDTH)):
            bundle = fetcher.entries(tile_index)
            first = tile_index * TILE_WIDTH
            rows = self.ledger.entries(first, first + len(bundle))
            for at, entry in enumerate(bundle):
                index = first + at
                if index < start:
                    continue
                problems += self._entry(index, entry, rows[at] if at < len(rows) else None, reader)
        return problems

    def _entry(self, index: int, entry: bytes, row: bytes | None, reader: TreeReader) -> list[str]:
        if leaf_hash(entry) != reader.leaf(index):
            return [f"entry {index} in its bundle is not the entry the tree holds"]
        if row != entry:
            return [f"ledger row {index} is {'missing' if row is None else 'not the logged entry'}"]
        try:
            parsed = parse_entry(entry)
        except EntryRefused as refused:
            return [f"entry {index}: {refused}"]
        wrong = None if self.objects is None else self.objects(parsed)
        return [] if wrong is None else [f"entry {index} ({parsed.key}): {wrong}"]
