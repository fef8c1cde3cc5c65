"""Bounded receive-pack: what a push may make Forkhorse spend, and what it may reference.

A pushed pack goes through three steps before the store sees it (`PushSession.receive`):

1. **Scan while it streams.** Each object header and each delta header is read as the pack
   arrives, and every object is inflated in 64 KiB steps (zlib's `max_length`) only to be
   counted: the object count, each object's inflated size, the inflated bytes of the whole
   push and the depth of OFS_DELTA chains are refused the moment a limit is passed, before
   anything is resolved. An object that inflates past the size its header declares is
   refused too. Memory: one step's output, whatever the pack claims.
2. **Resolve.** Deltas are applied against bases in the pack (REF_DELTA chains are measured
   here) and, for a thin pack, against external bases the pusher may read, and no others.
   Every commit, tree and tag is parsed and checked with dulwich's fsck rules; a tree has
   at most `tree_entries` entries, counted before it is parsed. Memory: the objects along
   one delta chain, each within `object_bytes`, all within `push_inflated_bytes`.
3. **Connectivity.** Every object the pack references (commit trees and parents, tree
   entries other than submodules, tag targets, thin delta bases) and every ref target must
   be in the pack or readable by the pusher: reachable from canonical's refs or from the
   refs of the repository pushed to (`Readable`). An object that is not reachable is
   refused in the same words, and after the same walk, whether or not the shared store
   holds it, so a refusal does not tell one agent what another pushed.

Only then is the pack, completed with its external bases, charged to the fork's storage
quota (`quota.py`; its ref quota is checked with the commands) and added to the store.
A refusal raises `PushRefused` (an OSError, which dulwich reports to the client as
`unpack <reason>`), and the spool file is removed on every path.

The ref names and commands are checked in `refnames`, the three steps are `pack_scan`,
`resolve` and `reachability`, and `session` runs them for one request.
"""

from __future__ import annotations

_COMMIT, _TREE, _BLOB, _TAG = 1, 2, 3, 4
_OFS_DELTA, _REF_DELTA = 6, 7
_TYPE_NAMES = {_COMMIT: b"commit", _TREE: b"tree", _BLOB: b"blob", _TAG: b"tag"}
_SHA_BYTES = 20
_STEP = 64 * 1024  # wire reads and inflation steps


class PushRefused(OSError):
    """A push refused for a reason the git client prints (`unpack <reason>` or `ng`)."""
