"""RFC 9162 Merkle trees (domain/merkle.py) against the RFC 6962/9162 test vectors and an
independent construction written here: roots, inclusion and consistency proofs for every
size up to a few hundred, and proofs that must not verify."""

from __future__ import annotations

import hashlib

import pytest
from forkhorse.domain import merkle
from hypothesis import given
from hypothesis import strategies as st

# The CT test inputs and MTH(D[n]) for n = 1..8 (RFC 6962's reference implementation).
INPUTS = [bytes.fromhex(h) for h in ("", "00", "10", "2021", "3031", "40414243",
          "5051525354555657", "606162636465666768696a6b6c6d6e6f")]  # fmt: skip
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
LARGEST = 300
LEAVES = [merkle.leaf_hash(index.to_bytes(4, "big")) for index in range(LARGEST)]


def _reference_root(leaves: list[bytes]) -> bytes:
    """MTH built bottom up, level by level, carrying an odd node up unpaired: a different
    construction from the module's top-down split, with the same result by RFC 9162."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    level = list(leaves)
    while len(level) > 1:
        paired = [
            hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest()
            for i in range(0, len(level) - 1, 2)
        ]
        level = paired + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def _root_from_path(leaf: bytes, index: int, size: int, path: list[bytes]) -> bytes | None:
    """An independent verifier: rebuild the root by following PATH's recursion (its last
    element is the top split's other side); None when the path's length does not fit."""
    if size == 1:
        return leaf if not path else None
    if not path:
        return None
    k = 1 << ((size - 1).bit_length() - 1)
    *rest, sibling = path
    if index < k:
        below = _root_from_path(leaf, index, k, rest)
        return None if below is None else merkle.node_hash(below, sibling)
    below = _root_from_path(leaf, index - k, size - k, rest)
    return None if below is None else merkle.node_hash(sibling, below)


def test_the_ct_vectors() -> None:
    assert merkle.root([]).hex() == hashlib.sha256(b"").hexdigest()
    leaves = [merkle.leaf_hash(entry) for entry in INPUTS]
    assert [merkle.root(leaves[:n]).hex() for n in range(1, 9)] == ROOTS


@pytest.mark.parametrize("size", range(LARGEST + 1))
def test_the_root_of_every_size_matches_an_independent_construction(size: int) -> None:
    assert merkle.root(LEAVES[:size]) == _reference_root(LEAVES[:size])


@pytest.mark.parametrize("size", range(1, LARGEST + 1))
def test_inclusion_proofs_verify_both_ways_and_nothing_else_does(size: int) -> None:
    leaves = LEAVES[:size]
    top = merkle.root(leaves)
    for index in sorted({0, size // 3, size // 2, size - 1}):
        proof = merkle.inclusion_proof(index, leaves)
        assert merkle.verify_inclusion(leaves[index], index, size, proof, top)
        assert _root_from_path(leaves[index], index, size, proof) == top
        other = LEAVES[size] if size < LARGEST else merkle.leaf_hash(b"other")
        assert not merkle.verify_inclusion(other, index, size, proof, top)
        if proof:
            assert not merkle.verify_inclusion(leaves[index], index, size, proof[:-1], top)
        assert not merkle.verify_inclusion(leaves[index], index, size, [*proof, top], top)
        if size > 1:
            moved = (index + 1) % size
            assert not merkle.verify_inclusion(leaves[index], moved, size, proof, top)


@pytest.mark.parametrize("size", range(1, LARGEST + 1))
def test_consistency_proofs_verify_and_a_rewritten_history_does_not(size: int) -> None:
    leaves = LEAVES[:size]
    new_root = merkle.root(leaves)
    for old in sorted({1, size // 2 or 1, max(size - 1, 1), size}):
        proof = merkle.consistency_proof(old, leaves)
        old_root = merkle.root(leaves[:old])
        assert merkle.verify_consistency(old, size, old_root, new_root, proof)
        if old < size:
            forged = merkle.root([merkle.leaf_hash(b"rewritten"), *leaves[1:old]])
            assert not merkle.verify_consistency(old, size, forged, new_root, proof)
            assert not merkle.verify_consistency(old, size, old_root, forged, proof)
            assert not merkle.verify_consistency(old, size, old_root, new_root, proof[:-1])


@given(st.integers(1, LARGEST), st.data())
def test_any_leaf_of_any_tree_is_proven(size: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, size - 1))
    leaves = LEAVES[:size]
    proof = merkle.inclusion_proof(index, leaves)
    assert merkle.verify_inclusion(leaves[index], index, size, proof, merkle.root(leaves))


def test_proofs_outside_the_tree_are_refused() -> None:
    with pytest.raises(ValueError, match="not in a tree of 3"):
        merkle.inclusion_proof(3, LEAVES[:3])
    with pytest.raises(ValueError, match="no consistency proof from 4 to 3"):
        merkle.consistency_proof(4, LEAVES[:3])
    assert not merkle.verify_inclusion(LEAVES[0], 0, 0, [], merkle.EMPTY_ROOT)
    assert merkle.verify_consistency(0, 5, merkle.EMPTY_ROOT, merkle.root(LEAVES[:5]), [])
