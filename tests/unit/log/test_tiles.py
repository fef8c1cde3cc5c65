"""C2SP tlog-tiles (domain/tiles.py): paths read and written one way, which tiles a tree
has, and roots and proofs computed from tiles equal to the ones computed from every leaf,
across tile boundaries and into the second level."""

from __future__ import annotations

import pytest
from forkhorse.domain import merkle
from forkhorse.domain.tiles import (
    ENTRIES_LEVEL,
    TILE_WIDTH,
    Tile,
    TileRefused,
    TreeReader,
    encode_index,
    entry_bundle,
    parent_hash,
    parse_tile_path,
    split_entry_bundle,
    split_hash_tile,
    tile_for,
    tiles_of,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.support import rfc9162

LEAVES = [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(TILE_WIDTH * 3 + 7)]


def _level_hashes(leaves: list[bytes], level: int) -> list[bytes]:
    """Every stored hash at tile level `level` (tree level 8 * level), from the leaves."""
    hashes = list(leaves)
    for _ in range(level):
        hashes = [
            parent_hash(hashes[i : i + TILE_WIDTH])
            for i in range(0, len(hashes) - TILE_WIDTH + 1, TILE_WIDTH)
        ]
    return hashes


def _reader(size: int, leaves: list[bytes]) -> TreeReader:
    def tile_hashes(tile: Tile) -> list[bytes]:
        level = _level_hashes(leaves[:size], tile.level)
        start = tile.index * TILE_WIDTH
        data = b"".join(level[start : start + tile.width])
        return split_hash_tile(tile, data)

    return TreeReader(size, tile_hashes)


@pytest.mark.parametrize(
    ("index", "path"),
    [(0, "000"), (7, "007"), (256, "256"), (1000, "x001/000"), (1234067, "x001/x234/067")],
)
def test_indexes_are_written_in_groups_of_three(index: int, path: str) -> None:
    assert encode_index(index) == path


def test_paths_round_trip_and_only_canonical_paths_parse() -> None:
    for tile in [Tile(0, 5, 256), Tile(2, 1234067, 3), Tile(ENTRIES_LEVEL, 0, 1)]:
        assert parse_tile_path(tile.path()) == tile
    assert Tile(0, 1234067, 17).path() == "tile/0/x001/x234/067.p/17"
    assert Tile(ENTRIES_LEVEL, 2, 256).path() == "tile/entries/002"
    for bad in ["tile/0/5", "tile/0/x000/005", "tile/0/005.p/256", "tile/0/005.p/0",
                "tile/0/005.p/07", "tile/01/005", "tile/0/../005", "checkpoint", "tile/x/000",
                "tile/0/005/", "/tile/0/005"]:  # fmt: skip
        with pytest.raises(TileRefused):
            parse_tile_path(bad)


def test_tiles_of_a_size_are_its_right_edge_and_everything_left_of_it() -> None:
    assert list(tiles_of(0)) == []
    assert list(tiles_of(1)) == [Tile(ENTRIES_LEVEL, 0, 1), Tile(0, 0, 1)]
    grown = list(tiles_of(TILE_WIDTH + 2, since=TILE_WIDTH - 1))
    assert grown == [
        Tile(ENTRIES_LEVEL, 0, 256), Tile(ENTRIES_LEVEL, 1, 2),
        Tile(0, 0, 256), Tile(0, 1, 2), Tile(1, 0, 1),
    ]  # fmt: skip
    assert list(tiles_of(10, since=10)) == []


@pytest.mark.parametrize("size", [1, 2, 3, 255, 256, 257, 511, 512, 513, 700, len(LEAVES)])
def test_roots_and_proofs_from_tiles_equal_those_from_every_leaf(size: int) -> None:
    leaves = LEAVES[:size]
    reader = _reader(size, LEAVES)
    assert reader.root() == merkle.root(leaves)
    for index in {0, size // 2, size - 1, min(size - 1, 256)}:
        assert reader.inclusion_proof(index) == merkle.inclusion_proof(index, leaves)
        assert reader.leaf(index) == leaves[index]
    for old in {1, size // 3 or 1, size - 1 or 1, min(size, 256), size}:
        assert reader.consistency_proof(old) == merkle.consistency_proof(old, leaves)


@given(st.integers(1, len(LEAVES)), st.data())
def test_any_proof_from_tiles_verifies(size: int, data: st.DataObject) -> None:
    reader = _reader(size, LEAVES)
    index = data.draw(st.integers(0, size - 1))
    old = data.draw(st.integers(1, size))
    root = reader.root()
    assert merkle.verify_inclusion(LEAVES[index], index, size, reader.inclusion_proof(index), root)
    old_root = merkle.root(LEAVES[:old])
    proof = reader.consistency_proof(old)
    assert merkle.verify_consistency(old, size, old_root, root, proof)


def test_a_tile_of_the_wrong_length_or_a_torn_bundle_is_refused() -> None:
    with pytest.raises(TileRefused, match="is 64 bytes, not 96"):
        split_hash_tile(Tile(0, 0, 3), b"\x00" * 64)
    bundle = entry_bundle([b"one", b"", b"three"])
    assert split_entry_bundle(Tile(ENTRIES_LEVEL, 0, 3), bundle) == [b"one", b"", b"three"]
    with pytest.raises(TileRefused, match="holds 3 entries, not 2"):
        split_entry_bundle(Tile(ENTRIES_LEVEL, 0, 2), bundle)
    with pytest.raises(TileRefused, match="inside an entry"):
        split_entry_bundle(Tile(ENTRIES_LEVEL, 0, 3), bundle[:-1])
    with pytest.raises(TileRefused, match="at most 65535"):
        entry_bundle([b"x" * 65536])


def test_a_tree_reader_refuses_a_node_its_tiles_do_not_hold() -> None:
    short = TreeReader(10, lambda tile: split_hash_tile(tile, b"\x00" * 32 * tile.width))
    assert tile_for(0, 0, 10) == Tile(0, 0, 10)
    with pytest.raises(TileRefused):
        short.node(3, 1)  # leaves 8..15 of a tree of 10


@pytest.mark.parametrize("size", [1, 2, 7, 255, 256, 257, 513, len(LEAVES)])
def test_proofs_from_tiles_verify_with_an_independent_rfc9162_verifier(size: int) -> None:
    reader = _reader(size, LEAVES)
    top = reader.root()
    for index in {0, size // 2, size - 1}:
        path = reader.inclusion_proof(index)
        assert rfc9162.root_from_inclusion(LEAVES[index], index, size, path) == top
        if path:
            assert rfc9162.root_from_inclusion(LEAVES[index], index, size, path[:-1]) != top
    for old in {1, size // 2 or 1, size - 1 or 1, size}:
        old_root = merkle.root(LEAVES[:old])
        proof = reader.consistency_proof(old)
        assert rfc9162.roots_from_consistency(old, size, old_root, proof) == (old_root, top)
        if old < size:
            forged = merkle.root([merkle.leaf_hash(b"rewritten"), *LEAVES[1:old]])
            implied = rfc9162.roots_from_consistency(old, size, forged, proof)
            assert implied != (forged, top)
