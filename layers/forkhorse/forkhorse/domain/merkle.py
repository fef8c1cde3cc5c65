"""RFC 9162 (Certificate Transparency v2) Merkle tree hashing, proofs and their verification.

The transparency log (issue 33) is a tree over its entries' leaf hashes: a leaf is
SHA-256(0x00 || entry), an interior node SHA-256(0x01 || left || right), the empty tree's
root SHA-256(""). A tree of n leaves splits at k, the largest power of two below n
(RFC 9162, 2.1.1), so any client can recompute roots and check the proofs below from the
same leaves: an inclusion proof (2.1.3) that an entry is in a tree of a given size, and a
consistency proof (2.1.4) that a larger tree appends to a smaller one. Verification follows
the RFC's algorithms (2.1.3.2, 2.1.4.2) and never trusts a proof's length.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than `size` (size > 1)."""
    return 1 << ((size - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH over leaf hashes (2.1.1)."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node_hash(root(leaves[:k]), root(leaves[k:]))


RangeRoot = Callable[[int, int], bytes]
"""MTH of the leaves in [start, end): from a list here, from tiles in `domain.tiles`."""


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(index, D[n]) (2.1.3.1): the siblings from the leaf up to the root."""
    return inclusion_path(index, len(leaves), _range_of(leaves))


def consistency_proof(old_size: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) (2.1.4.1): what shows the tree of `old_size` is a prefix of this one."""
    return consistency_path(old_size, len(leaves), _range_of(leaves))


def _range_of(leaves: Sequence[bytes]) -> RangeRoot:
    return lambda start, end: root(leaves[start:end])


def inclusion_path(index: int, size: int, range_root: RangeRoot) -> list[bytes]:
    """PATH(index, D[size]) with subtree roots from `range_root`."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    return _path(index, 0, size, range_root)


def _path(index: int, start: int, end: int, range_root: RangeRoot) -> list[bytes]:
    if end - start == 1:
        return []
    mid = start + _split(end - start)
    if index < mid:
        return [*_path(index, start, mid, range_root), range_root(mid, end)]
    return [*_path(index, mid, end, range_root), range_root(start, mid)]


def consistency_path(old_size: int, size: int, range_root: RangeRoot) -> list[bytes]:
    """PROOF(old_size, D[size]) with subtree roots from `range_root`."""
    if not 0 < old_size <= size:
        raise ValueError(f"no consistency proof from {old_size} to {size}")
    return _subproof(old_size, 0, size, True, range_root)


def _subproof(m: int, start: int, end: int, complete: bool, range_root: RangeRoot) -> list[bytes]:
    if m == end - start:
        return [] if complete else [range_root(start, end)]
    mid = start + _split(end - start)
    if m <= mid - start:
        return [*_subproof(m, start, mid, complete, range_root), range_root(mid, end)]
    return [*_subproof(m - (mid - start), mid, end, False, range_root), range_root(start, mid)]


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], expected_root: bytes
) -> bool:
    """2.1.3.2: does `proof` show `leaf` at `index` in the tree of `size` with this root?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == expected_root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """2.1.4.2: does `proof` show the tree of `new_size` appends to the one of `old_size`?"""
    if not 0 < old_size <= new_size:
        return old_size == 0 and not proof  # the empty tree is a prefix of every tree
    if old_size == new_size:
        return not proof and old_root == new_root
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root starts the path
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == old_root and sr == new_root
