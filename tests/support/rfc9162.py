"""An independent RFC 9162 verifier for the tests: written again from the RFC's recursive
definitions (2.1.3.1 PATH, 2.1.4.1 PROOF/SUBPROOF), sharing no code with
`forkhorse.domain.merkle`, whose verifiers follow the RFC's iterative algorithms instead.

Each function rebuilds the root(s) a proof implies by walking the same recursion that made
it, consuming the proof from its end (the top split's sibling comes last); None when the
proof's length does not fit the tree."""

from __future__ import annotations

import hashlib


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    k = 1
    while k * 2 < size:
        k *= 2
    return k


def root_from_inclusion(leaf: bytes, index: int, size: int, path: list[bytes]) -> bytes | None:
    if size == 1:
        return leaf if not path else None
    if not path:
        return None
    k = _split(size)
    *rest, sibling = path
    if index < k:
        below = root_from_inclusion(leaf, index, k, rest)
        return None if below is None else _node(below, sibling)
    below = root_from_inclusion(leaf, index - k, size - k, rest)
    return None if below is None else _node(sibling, below)


def roots_from_consistency(
    old_size: int, size: int, old_root: bytes, proof: list[bytes]
) -> tuple[bytes, bytes] | None:
    """(old root, new root) the proof implies, given the old root it may start from."""
    found = _subproof(old_size, size, True, old_root, list(proof))
    if found is None:
        return None
    old, new, left = found
    return None if left else (old, new)


def _subproof(
    m: int, n: int, complete: bool, old_root: bytes, proof: list[bytes]
) -> tuple[bytes, bytes, list[bytes]] | None:
    """SUBPROOF(m, D[n], b) read backwards: (the old subtree's root, this subtree's root,
    the proof not yet consumed)."""
    if m == n:
        if complete:
            return old_root, old_root, proof  # the old tree is this subtree: no hash given
        if not proof:
            return None
        return proof[-1], proof[-1], proof[:-1]
    if not proof:
        return None
    k = _split(n)
    *rest, sibling = proof
    if m <= k:
        below = _subproof(m, k, complete, old_root, rest)
        if below is None:
            return None
        old, new, left = below
        return old, _node(new, sibling), left
    below = _subproof(m - k, n - k, False, old_root, rest)
    if below is None:
        return None
    old, new, left = below
    return _node(sibling, old), _node(sibling, new), left
