"""Checking a log from its static files alone: the checkpoint's signature, that a newer tree
appends to an older one, an entry's inclusion, and every entry against the signed root.

What reads the files (HTTP, a directory, the service's own store) is a `LogSource`. Nothing
here trusts the server's arithmetic: roots and proofs are computed from tiles and checked
against the signed checkpoint, and every refusal names what changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from forkhorse.domain.checkpoint import Checkpoint, CheckpointRefused, parse_checkpoint
from forkhorse.domain.merkle import leaf_hash, root, verify_consistency, verify_inclusion
from forkhorse.domain.tiles import (
    ENTRIES_LEVEL,
    TILE_WIDTH,
    Tile,
    TileRefused,
    TreeReader,
    split_entry_bundle,
    split_hash_tile,
    tile_for,
)
from forkhorse.tlog.note import NoteRefused, open_note

CHECKPOINT_PATH = "checkpoint"


class LogRefused(Exception):
    """The log is not what a signed, append-only log must be; the message names what."""


class LogSource(Protocol):
    def read(self, path: str) -> bytes | None:
        """A file under the log's prefix (`checkpoint`, `tile/...`); None if absent."""
        ...


@dataclass(frozen=True)
class LogKey:
    """What a verifier needs: the log's origin (the note's key name) and its public key."""

    origin: str
    public_pem: str


def open_checkpoint(note: str, key: LogKey) -> Checkpoint:
    """The checkpoint a signed note states, once the log's key verifies it."""
    try:
        checkpoint = parse_checkpoint(open_note(note, key.origin, key.public_pem))
    except (NoteRefused, CheckpointRefused) as refused:
        raise LogRefused(f"the checkpoint is refused: {refused}") from refused
    if checkpoint.origin != key.origin:
        raise LogRefused(f"the checkpoint is of {checkpoint.origin!r}, not {key.origin!r}")
    return checkpoint


def fetch_checkpoint(source: LogSource, key: LogKey) -> tuple[Checkpoint, str]:
    data = source.read(CHECKPOINT_PATH)
    if data is None:
        raise LogRefused("the log serves no checkpoint")
    try:
        note = data.decode()
    except UnicodeDecodeError as garbled:
        raise LogRefused("the checkpoint is not UTF-8") from garbled
    return open_checkpoint(note, key), note


@dataclass
class TileFetcher:
    """Tiles of the tree of `size`: the partial tile of that size, else the full tile, else
    the prefix of the widest this log has now (C2SP lets a log drop old partials)."""

    source: LogSource
    size: int
    newest: int | None = None

    def read(self, tile: Tile) -> bytes:
        for candidate in self._candidates(tile):
            data = self.source.read(candidate.path())
            if data is not None:
                return self._prefix(tile, candidate, data)
        raise LogRefused(f"the log does not serve {tile.path()}")

    def _candidates(self, tile: Tile) -> Iterator[Tile]:
        yield tile
        if not tile.full:
            yield tile.as_full()
            if self.newest is not None and self.newest > self.size:
                wider = tile_for(tile.level, tile.index, self.newest)
                if wider.width > tile.width and not wider.full:
                    yield wider

    @staticmethod
    def _prefix(tile: Tile, candidate: Tile, data: bytes) -> bytes:
        if candidate == tile:
            return data
        if tile.level == ENTRIES_LEVEL:
            entries = _entries(candidate, data)[: tile.width]
            return b"".join(len(e).to_bytes(2, "big") + e for e in entries)
        return b"".join(_hashes(candidate, data)[: tile.width])

    def hashes(self, tile: Tile) -> list[bytes]:
        return _hashes(tile, self.read(tile))

    def entries(self, index: int) -> list[bytes]:
        tile = tile_for(ENTRIES_LEVEL, index, self.size)
        return _entries(tile, self.read(tile))

    def reader(self) -> TreeReader:
        return TreeReader(self.size, self.hashes)


def _hashes(tile: Tile, data: bytes) -> list[bytes]:
    try:
        return split_hash_tile(tile, data)
    except TileRefused as refused:
        raise LogRefused(str(refused)) from refused


def _entries(tile: Tile, data: bytes) -> list[bytes]:
    try:
        return split_entry_bundle(tile, data)
    except TileRefused as refused:
        raise LogRefused(str(refused)) from refused


def check_tiles(fetcher: TileFetcher, checkpoint: Checkpoint) -> TreeReader:
    """A reader over tiles whose root is the checkpoint's; refused if the tiles differ."""
    reader = fetcher.reader()
    try:
        computed = reader.root()
    except TileRefused as refused:
        raise LogRefused(str(refused)) from refused
    if computed != checkpoint.root:
        raise LogRefused(
            f"the tiles do not hash to the checkpoint's root at size {checkpoint.size}: "
            "a tile was changed"
        )
    return reader


def check_append_only(source: LogSource, old: Checkpoint, new: Checkpoint) -> None:
    """Refused unless the tree of `new` appends to the tree of `old` (both verified)."""
    if new.size < old.size:
        raise LogRefused(
            f"rollback: the log's checkpoint is of size {new.size}, older than the size "
            f"{old.size} already verified"
        )
    if new.size == old.size:
        if new.root != old.root:
            raise LogRefused(
                f"split view: two different trees of size {new.size} were signed "
                f"({short_digest(old.root)} and {short_digest(new.root)})"
            )
        return
    reader = check_tiles(TileFetcher(source, new.size), new)
    proof = reader.consistency_proof(old.size) if old.size else []
    if not verify_consistency(old.size, new.size, old.root, new.root, proof):
        raise LogRefused(
            f"rewritten history: the tree of size {new.size} does not append to the tree "
            f"of size {old.size} verified before"
        )


def check_inclusion(source: LogSource, checkpoint: Checkpoint, index: int, entry: bytes) -> None:
    """Refused unless `entry` is at `index` in the tree the checkpoint signs."""
    if not 0 <= index < checkpoint.size:
        raise LogRefused(f"entry {index} is not in the tree of size {checkpoint.size}")
    reader = check_tiles(TileFetcher(source, checkpoint.size), checkpoint)
    proof = reader.inclusion_proof(index)
    if not verify_inclusion(leaf_hash(entry), index, checkpoint.size, proof, checkpoint.root):
        raise LogRefused(f"entry {index} is not the entry the log signed at that index")


def all_entries(source: LogSource, checkpoint: Checkpoint) -> list[bytes]:
    """Every entry of the tree, refused unless together they hash to the signed root (a
    deleted, reordered or edited entry, or a bundle that disagrees with its hash tile)."""
    fetcher = TileFetcher(source, checkpoint.size)
    entries: list[bytes] = []
    for index in range(-(-checkpoint.size // TILE_WIDTH)):
        entries.extend(fetcher.entries(index))
    leaves = [leaf_hash(entry) for entry in entries]
    if len(entries) != checkpoint.size or root(leaves) != checkpoint.root:
        raise LogRefused(
            f"the entry bundles do not hash to the checkpoint's root at size "
            f"{checkpoint.size}: {first_difference(fetcher, leaves)}"
        )
    return entries


def first_difference(fetcher: TileFetcher, leaves: list[bytes]) -> str:
    """Which entry the bundles hold that the hash tiles (hence the root) disagree with."""
    for index in range(-(-fetcher.size // TILE_WIDTH)):
        try:
            hashes = fetcher.hashes(tile_for(0, index, fetcher.size))
        except LogRefused as refused:
            return str(refused)
        for at, stored in enumerate(hashes):
            position = index * TILE_WIDTH + at
            if position >= len(leaves) or leaves[position] != stored:
                return f"entry {position} was deleted, reordered or edited"
    return "a hash tile was changed"


def short_digest(digest: bytes) -> str:
    return digest.hex()[:16]
