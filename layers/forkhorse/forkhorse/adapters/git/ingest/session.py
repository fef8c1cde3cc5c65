"""One push: its commands, its pack through the three steps, and its ref updates judged;
and the temporary packs a crashed push leaves behind."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dulwich.objects import ObjectID, RawObjectID
from dulwich.pack import extend_pack

from forkhorse.adapters.git.ingest import _COMMIT, _TAG, _TYPE_NAMES, PushRefused
from forkhorse.adapters.git.ingest.pack_scan import _scan, _Wire
from forkhorse.adapters.git.ingest.reachability import Readable
from forkhorse.adapters.git.ingest.refnames import Command, check_commands
from forkhorse.adapters.git.ingest.resolve import _Received, _Resolver
from forkhorse.adapters.git.probe import probe_object
from forkhorse.adapters.git.quota import ForkQuota, QuotaExceeded
from forkhorse.domain.limits import GIT, GitLimits
from forkhorse.domain.snapshot import SnapshotUnavailable

if TYPE_CHECKING:
    from dulwich.object_store import BaseObjectStore, PackBasedObjectStore

ZERO = b"0" * 40
_SHOWN_MISSING = 3
STALE_SPOOL_SECONDS = 3600  # a temporary pack this old belongs to no running push


class PushSession:
    """One receive-pack request: its commands, its pack, and what it may reference.

    `check_commands` runs before the pack is read (dulwich's pre-receive), `receive` takes
    the pack (dulwich's `add_thin_pack`), `target_problem` judges each ref update (dulwich's
    update hook). `readable_tips` names the refs the pusher may read: canonical's and those
    of the repository pushed to. `quota`, for a push to a fork, is that fork's quota
    (`quota.py`): its refs are checked with the commands, and its bytes charged once the
    pack is complete, before it is stored.
    """

    def __init__(
        self,
        readable_tips: Callable[[], Iterable[bytes]],
        *,
        limits: GitLimits = GIT,
        quota: ForkQuota | None = None,
    ) -> None:
        self._readable_tips = readable_tips
        self._limits = limits
        self._quota = quota
        self.commands: list[Command] = []
        self._received: _Received | None = None
        self._readable: Readable | None = None
        self._readable_targets: set[bytes] = set()
        self._checked_targets: set[bytes] = set()

    @property
    def limits(self) -> GitLimits:
        return self._limits

    def check_commands(self, commands: Sequence[Command]) -> None:
        check_commands(commands, self._limits)
        if self._quota is not None:
            try:
                self._quota.check_commands(commands)
            except QuotaExceeded as exceeded:
                raise PushRefused(str(exceeded)) from exceeded
        self.commands = list(commands)

    def receive(
        self,
        objects: PackBasedObjectStore,
        read_all: Callable[[int], bytes],
        read_some: Callable[[int], bytes] | None,
        max_input_size: int | None,
    ) -> Any:
        """Scan, resolve and check a pushed pack, then add it to `objects` and return what
        the store's `add_pack` commit returns; or refuse it (PushRefused), leaving nothing."""
        spool, commit, abort = objects.add_pack()
        try:
            wire = _Wire(read_some or read_all, spool, max_input_size or None)
            entries = _scan(wire, self._limits)
            spool.flush()
            received = _Received(self._limits)
            resolver = _Resolver(spool, entries, received, self._limits)
            resolver.resolve_in_pack()
            readable = self._readable_view(objects)
            hints = self._hints(received)
            pending = {_hex(base) for base in resolver.pending_bases()}
            usable = readable.find(pending, received, hints) if pending else set()
            for base in sorted(resolver.pending_bases()):
                if _hex(base) in usable:
                    type_num, data = objects.get_raw(ObjectID(_hex(base)))
                    resolver.resolve_external(base, type_num, bytes(data))
            unresolved = resolver.pending_bases()
            if unresolved:
                raise PushRefused(_unreachable("delta base", [b.hex() for b in unresolved]))
            self._check_connected(readable, received, self._hints(received))
            self._received = received
            if not entries:
                _quietly(abort)
                return None
            outside = {
                RawObjectID(base) for base in received.ext_bases if _hex(base) not in received.types
            }
            extend_pack(
                spool, outside, get_raw=objects.get_raw, object_format=objects.object_format
            )
            charged = self._charge(spool.seek(0, os.SEEK_END))  # commit reads from the end
            stored = commit()
            if charged is not None and self._quota is not None:
                pack_data = getattr(stored, "data", None)
                if pack_data is not None:
                    self._quota.stored(charged, Path(pack_data.filename).stem)
            return stored
        except BaseException:
            _quietly(abort)
            raise

    def target_problem(self, objects: BaseObjectStore, ref: bytes, new: bytes) -> str | None:
        """Why `ref` may not be set to `new`, or None: the target must be pushed or readable,
        a branch must name a commit and a tag a commit or a tag."""
        received = self._received
        type_num = received.types.get(new) if received is not None else None
        if type_num is None:
            if new not in self._checked_targets:
                readable = self._readable_view(objects)
                self._readable_targets |= readable.find({new})
                self._checked_targets.add(new)
            if new not in self._readable_targets:
                return _unreachable("ref target", [new.decode("ascii")])
            try:
                type_num = probe_object(objects, new.decode("ascii"), 0).type_num
            except SnapshotUnavailable:
                return _unreachable("ref target", [new.decode("ascii")])
        if ref.startswith(b"refs/heads/") and type_num != _COMMIT:
            kind = _TYPE_NAMES.get(type_num, b"object").decode()
            return f"a branch must point at a commit, and {new.decode()} is a {kind}"
        if type_num not in (_COMMIT, _TAG):
            kind = _TYPE_NAMES.get(type_num, b"object").decode()
            return f"a tag ref must point at a commit or a tag, and {new.decode()} is a {kind}"
        return None

    # Internals ---------------------------------------------------------------------------
    def _charge(self, size: int) -> str | None:
        """Charge the complete pack to the fork's quota, or refuse the push."""
        if self._quota is None:
            return None
        try:
            return self._quota.charge(size)
        except QuotaExceeded as exceeded:
            raise PushRefused(str(exceeded)) from exceeded

    def _readable_view(self, objects: BaseObjectStore) -> Readable:
        if self._readable is None:
            self._readable = Readable(objects, self._readable_tips(), self._limits.push_objects)
        return self._readable

    def _hints(self, received: _Received) -> list[bytes]:
        parents = [
            parent
            for _, commit_parents in received.commits.values()
            for parent in commit_parents
            if parent not in received.types
        ]
        olds = [old for old, _, _ in self.commands if old != ZERO]
        return list(dict.fromkeys([*parents, *olds]))

    def _check_connected(self, readable: Readable, received: _Received, hints: list[bytes]) -> None:
        targets = {new for _, new, _ in self.commands if new != ZERO}
        wanted = (received.referenced | targets) - received.types.keys()
        found = readable.find(wanted, received, hints) if wanted else set()
        self._readable_targets = found & targets
        self._checked_targets = set(targets)
        missing = sorted((received.referenced - received.types.keys()) - found)
        if missing:
            raise PushRefused(_unreachable("object", [sha.decode("ascii") for sha in missing]))


def _unreachable(what: str, shas: Sequence[str]) -> str:
    listed = ", ".join(sorted(shas)[:_SHOWN_MISSING])
    more = f" and {len(shas) - _SHOWN_MISSING} more" if len(shas) > _SHOWN_MISSING else ""
    return (
        f"{what} {listed}{more} is neither in the pushed pack nor reachable from canonical "
        "or this repository's refs; push the objects themselves (the server checks "
        "connectivity, like git's receive.fsckObjects)"
    )


def _hex(raw: bytes) -> bytes:
    return raw.hex().encode("ascii")


def _quietly(action: Callable[[], object]) -> None:
    with suppress(OSError, ValueError):
        action()


# --- disk hygiene ----------------------------------------------------------------------------
def sweep_stale_spools(objects_dir: Path, grace_seconds: float = STALE_SPOOL_SECONDS) -> int:
    """Remove temporary packs a crashed push left behind (`tmp_pack_*` in the objects
    directory, a `.pack` without its `.idx` in `pack/`), only those older than the grace
    period so a push in progress keeps its own. Returns how many were removed."""
    cutoff = time.time() - grace_seconds
    removed = 0
    candidates = list(objects_dir.glob("tmp_pack_*"))
    pack_dir = objects_dir / "pack"
    if pack_dir.is_dir():
        names = {path.name for path in pack_dir.iterdir()}
        candidates += [
            pack_dir / name
            for name in names
            if name.endswith(".pack") and name[: -len(".pack")] + ".idx" not in names
        ]
    for path in candidates:
        with suppress(FileNotFoundError):
            if path.stat().st_mtime < cutoff:
                os.remove(path)
                removed += 1
    return removed


class SessionPackReceiver:
    """Mixed into a store's object store class: a pushed pack goes through the request's
    `PushSession`, never straight into the store; without a session a push is refused."""

    push_session: PushSession | None = None

    def add_thin_pack(
        self,
        read_all: Callable[[int], bytes],
        read_some: Callable[[int], bytes] | None,
        progress: Callable[..., None] | None = None,
        *,
        max_input_size: int | None = None,
    ) -> Any:
        session = self.push_session
        if session is None:
            raise PushRefused("this object store accepts pushes only through a push session")
        return session.receive(
            cast("PackBasedObjectStore", self), read_all, read_some, max_input_size
        )
