"""C2SP tlog-tiles: the log's tree cut into static, immutable files.

A hash tile at level L, index N holds up to 256 consecutive hashes of the tree's level 8L
(leaf hashes at level 0), 32 bytes each; an entry bundle holds the same 256 entries as the
level-0 tile, each a big-endian uint16 length and the entry. A tile with fewer than 256 is
partial and named with `.p/<W>`; N is written in three-digit groups, all but the last
prefixed `x` (1234067 -> `x001/x234/067`). Any subtree the RFC 9162 proofs need is computed
from tiles (`TreeReader`), so a client checks proofs with no help from the server
(c2sp.org/tlog-tiles).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from forkhorse.domain.merkle import (
    EMPTY_ROOT,
    consistency_path,
    inclusion_path,
    node_hash,
    root,
)

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
HASH_SIZE = 32
MAX_ENTRY_BYTES = 0xFFFF  # a bundle's length prefix is a uint16
ENTRIES_LEVEL = -1  # how `Tile` names an entry bundle
_PATH = re.compile(r"tile/(entries|0|[1-9][0-9]?)/((?:x[0-9]{3}/)*[0-9]{3})(?:\.p/([0-9]+))?")


class TileRefused(ValueError):
    """Not a tile this log serves, or a tile that does not hold what it should."""


@dataclass(frozen=True, order=True)
class Tile:
    level: int  # ENTRIES_LEVEL for an entry bundle
    index: int
    width: int  # 1..256; 256 is a full tile

    def __post_init__(self) -> None:
        if self.level < ENTRIES_LEVEL or self.index < 0 or not 0 < self.width <= TILE_WIDTH:
            raise TileRefused(f"no such tile: level {self.level}, {self.index}, {self.width}")

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    def path(self) -> str:
        level = "entries" if self.level == ENTRIES_LEVEL else str(self.level)
        suffix = "" if self.full else f".p/{self.width}"
        return f"tile/{level}/{encode_index(self.index)}{suffix}"

    def as_full(self) -> Tile:
        return Tile(self.level, self.index, TILE_WIDTH)

    def in_tree(self, size: int) -> bool:
        """Whether the tree of `size` has every hash (or entry) this tile holds."""
        return self.index * TILE_WIDTH + self.width <= _count(self.level, size)


def encode_index(index: int) -> str:
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*(f"x{g}" for g in groups[:-1]), groups[-1]])


def parse_tile_path(path: str) -> Tile:
    """The tile a path names, read strictly: one tile has one path."""
    match = _PATH.fullmatch(path)
    if match is None:
        raise TileRefused(f"not a tile path: {path[:120]!r}")
    level_text, index_text, width_text = match.groups()
    level = ENTRIES_LEVEL if level_text == "entries" else int(level_text)
    width = TILE_WIDTH if width_text is None else int(width_text)
    tile = Tile(level, int(index_text.replace("x", "").replace("/", "")), width)
    if tile.path() != path:
        raise TileRefused(f"not the canonical path of its tile: {path[:120]!r}")
    return tile


def _count(level: int, size: int) -> int:
    """How many hashes the tree of `size` has at tile level `level` (entries: level 0)."""
    return size >> (TILE_HEIGHT * max(level, 0))


def tile_for(level: int, index: int, size: int) -> Tile:
    """The tile (level, index) as the tree of `size` has it (its width at that size)."""
    width = min(TILE_WIDTH, _count(level, size) - index * TILE_WIDTH)
    return Tile(level, index, width)


def tiles_of(size: int, since: int = 0) -> Iterator[Tile]:
    """Every tile the tree of `size` has that the tree of `since` has not (all of them for
    0), lowest level first; entry bundles first of all."""
    level = ENTRIES_LEVEL
    while _count(level, size) > 0:
        count, before = _count(level, size), _count(level, since)
        for index in range(before // TILE_WIDTH, (count - 1) // TILE_WIDTH + 1):
            tile = tile_for(level, index, size)
            if index * TILE_WIDTH + tile.width > before:
                yield tile
        level += 1


# --- tile contents --------------------------------------------------------------------------
def hash_tile(hashes: Sequence[bytes]) -> bytes:
    return b"".join(hashes)


def split_hash_tile(tile: Tile, data: bytes) -> list[bytes]:
    if len(data) != tile.width * HASH_SIZE:
        raise TileRefused(f"{tile.path()} is {len(data)} bytes, not {tile.width * HASH_SIZE}")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


def entry_bundle(entries: Sequence[bytes]) -> bytes:
    for entry in entries:
        if len(entry) > MAX_ENTRY_BYTES:
            raise TileRefused(f"an entry is at most {MAX_ENTRY_BYTES} bytes")
    return b"".join(len(entry).to_bytes(2, "big") + entry for entry in entries)


def split_entry_bundle(tile: Tile, data: bytes) -> list[bytes]:
    entries, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise TileRefused(f"{tile.path()} ends inside a length prefix")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise TileRefused(f"{tile.path()} ends inside an entry")
        entries.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    if len(entries) != tile.width:
        raise TileRefused(f"{tile.path()} holds {len(entries)} entries, not {tile.width}")
    return entries


def parent_hash(full_tile_hashes: Sequence[bytes]) -> bytes:
    """The hash one level up (8 tree levels) of a full tile: the root of its 256 hashes."""
    return root(full_tile_hashes)


# --- proofs from tiles ----------------------------------------------------------------------
TileHashes = Callable[[Tile], list[bytes]]
"""The hashes of a hash tile, as the reader fetched and checked its length."""


@dataclass
class TreeReader:
    """Subtree roots, inclusion and consistency proofs for the tree of `size`, computed from
    its hash tiles (fetched through `tile_hashes`, each once)."""

    size: int
    tile_hashes: TileHashes

    def __post_init__(self) -> None:
        self._tiles: dict[tuple[int, int], list[bytes]] = {}

    def _hashes(self, level: int, index: int) -> list[bytes]:
        key = (level, index)
        if key not in self._tiles:
            self._tiles[key] = self.tile_hashes(tile_for(level, index, self.size))
        return self._tiles[key]

    def node(self, height: int, index: int) -> bytes:
        """The root of the perfect subtree of 2**height leaves starting at index * 2**height."""
        level, rest = divmod(height, TILE_HEIGHT)
        first = index << rest
        hashes = self._hashes(level, first // TILE_WIDTH)
        at = first % TILE_WIDTH
        span = hashes[at : at + (1 << rest)]
        if len(span) != 1 << rest:
            raise TileRefused(f"the tree of {self.size} has no node {height}/{index}")
        return root(span)

    def range_root(self, start: int, end: int) -> bytes:
        """MTH of [start, end) for the ranges RFC 9162's recursion visits (start aligned)."""
        if start == end:
            return EMPTY_ROOT
        nodes, at = [], start
        for height in reversed(range((end - start).bit_length())):
            if (end - start) >> height & 1:
                nodes.append(self.node(height, at >> height))
                at += 1 << height
        folded = nodes[-1]
        for left in reversed(nodes[:-1]):
            folded = node_hash(left, folded)
        return folded

    def root(self) -> bytes:
        return self.range_root(0, self.size)

    def inclusion_proof(self, index: int) -> list[bytes]:
        return inclusion_path(index, self.size, self.range_root)

    def consistency_proof(self, old_size: int) -> list[bytes]:
        return consistency_path(old_size, self.size, self.range_root)

    def leaf(self, index: int) -> bytes:
        return self.node(0, index)
