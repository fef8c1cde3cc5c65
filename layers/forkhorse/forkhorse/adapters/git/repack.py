"""Local repack and prune of one project's objects directory (canonical's and every fork's),
and the consolidation that keeps its pack count bounded.

**Collection** (`repack`, run by `forkhorse gc` and the server's periodic collector). What
is reachable from any repository's refs, or from the extra tips (reviews' commits), is
copied out of the packs it replaces into one new pack (deltas reused where their base comes
along) before anything is deleted; the replaced packs are those written before the cutoff
that hold unreachable objects, and the packs whose objects are all reached, but for the
largest of these while each is at least twice everything else replaced together (so a
collection rewrites the garbage-holding and small packs, not a big project's base pack
every time). Loose objects written before the cutoff go too. Anything else newer is never
touched: a push in flight has its pack, or a just-written object, newer than that, and the
objects it brings are not reached yet.

A push that completes during the walk may point a ref at objects the walk saw as
unreachable (say, a fork's history pushed again). So deletion happens under the project's
maintenance lock, held exclusively, which every smart-HTTP request holds shared for its
whole length, and what the walk saw as unreachable goes only if every ref still names a tip
the walk started from; otherwise only the packs the new pack wholly holds go, and the next
round tries again. A collection that removed everything unreachable it found older than the
cutoff also measures each fork's kept bytes (`quota.py`): the packed bytes of the objects
its refs reach and canonical's do not, whether other forks reach them too (the walk goes
fork by fork, stopping at canonical's objects, so an object is read once per fork that
reaches it beyond canonical; `limit` bounds those reads together).

**Consolidation** (`consolidate`, started by a push that leaves more than
`GitLimits.packs_per_project` packs). No walk: the packs are ordered by size, the largest
are kept while each is at least twice all smaller ones together (at most half the pack
limit of them), and every other pack is merged into one, reachable or not; the merged pack
takes the newest modification time of the packs it replaces, so unreachable objects in it
are collected once the grace period has passed for all of them. Each merge leaves at most
`packs_per_project // 2 + 1` packs, and an object is rewritten again only once the packs
pushed after it add up to about its pack's size: a push's amortized cost is proportional
to the push times the logarithm of the project's growth, never the project's size per push.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.object_store import DiskObjectStore
from dulwich.objects import Commit, ObjectID, Tag, Tree
from dulwich.pack import generate_unpacked_objects, load_pack_index

from forkhorse.ports.git import PackCollection, ReachTooLarge

LOCK_NAME = "maintenance.lock"
REPACK_LOCK_NAME = "repack.lock"
# How long a repack waits for the requests in flight before it deletes; past it, it
# deletes nothing this round.
LOCK_WAIT_SECONDS = 30.0
_LOCK_POLL_SECONDS = 0.05


class MaintenanceLock:
    """A project's reader-writer lock across threads and processes (flock on one file):
    requests share it; deletion holds it alone."""

    def __init__(self, path: Path) -> None:
        self._path = path

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._open() as descriptor:
            fcntl.flock(descriptor, fcntl.LOCK_SH)
            yield

    @contextmanager
    def exclusive(self, wait_seconds: float) -> Iterator[bool]:
        """Yields whether the lock was taken within `wait_seconds`."""
        with self._open() as descriptor:
            deadline = time.monotonic() + wait_seconds
            while True:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(_LOCK_POLL_SECONDS)
                    continue
                yield True
                return

    @contextmanager
    def _open(self) -> Iterator[int]:
        descriptor = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            yield descriptor
        finally:
            os.close(descriptor)  # closing the descriptor releases its flock


Tips = Mapping[str | None, list[bytes]]  # each repository's ref targets; canonical is None
_TRAILER = 20  # a pack's checksum


@dataclass(frozen=True)
class _Pack:
    """One complete pack: its files, its object ids, its size, and whether it predates the
    cutoff."""

    files: list[Path]
    ids: list[bytes]
    old: bool
    size: int = 0
    mtime: float = 0.0


@dataclass(frozen=True)
class _Plan:
    """What a repack replaces with its new pack."""

    covered: dict[str, _Pack]  # every object reached: the new pack holds them all, any age
    aged: dict[str, _Pack]  # written before the cutoff, holding unreachable objects
    loose: dict[bytes, Path]  # written before the cutoff

    @classmethod
    def of(cls, packs: dict[str, _Pack], loose: dict[bytes, Path], reached: set[bytes]) -> _Plan:
        covered = {
            name: pack for name, pack in packs.items() if all(sha in reached for sha in pack.ids)
        }
        aged = {name: pack for name, pack in packs.items() if pack.old and name not in covered}
        others = sum(pack.size for pack in aged.values()) + _size(loose.values())
        for name in _base_packs(covered, others):
            del covered[name]
        return cls(covered, aged, loose)

    @property
    def packs(self) -> dict[str, _Pack]:
        return {**self.covered, **self.aged}

    @property
    def idle(self) -> bool:
        """Nothing to prune, and at most one pack of live objects: already consolidated."""
        return not self.aged and not self.loose and len(self.covered) < 2

    def keep(self, reached: set[bytes]) -> list[bytes]:
        """The reached objects of what is replaced: the new pack's."""
        ids = {sha for pack in self.packs.values() for sha in pack.ids} | set(self.loose)
        return sorted(ids & reached)


def _base_packs(packs: Mapping[str, _Pack], others: int, most: int | None = None) -> list[str]:
    """The largest packs, each at least twice all smaller ones (and `others`) together: the
    geometric progression a merge keeps (at most `most` of them)."""
    order = sorted(packs, key=lambda name: (-packs[name].size, name))
    rest = sum(pack.size for pack in packs.values()) + others
    kept: list[str] = []
    for name in order:
        rest -= packs[name].size
        if (most is not None and len(kept) >= most) or packs[name].size < 2 * rest:
            break
        kept.append(name)
    return kept


def _older(paths: Iterable[Path], cutoff: float) -> bool:
    try:
        return all(path.stat().st_mtime < cutoff for path in paths)
    except FileNotFoundError:
        return False


def _complete_packs(store: DiskObjectStore, cutoff: float) -> dict[str, _Pack]:
    """Every pack with its index (one still being written has none yet)."""
    found: dict[str, _Pack] = {}
    for pack in sorted(Path(store.pack_dir).glob("*.pack")):
        files = [pack.with_suffix(".idx"), pack]
        try:
            index = load_pack_index(str(files[0]), store.object_format)
            stats = [path.stat() for path in files]
        except FileNotFoundError:
            continue
        with closing(index):
            ids = [bytes(sha) for sha in index]
        mtime = max(info.st_mtime for info in stats)
        found[pack.stem] = _Pack(files, ids, mtime < cutoff, stats[1].st_size, mtime)
    return found


def _old_loose(objects_dir: Path, cutoff: float) -> dict[bytes, Path]:
    found: dict[bytes, Path] = {}
    for fan in objects_dir.iterdir():
        if len(fan.name) != 2 or not fan.is_dir():
            continue
        for path in fan.iterdir():
            sha = (fan.name + path.name).encode("ascii")
            if len(sha) == 40 and _older([path], cutoff):
                found[sha] = path
    return found


def _size(paths: Iterable[Path]) -> int:
    return sum(path.stat().st_size for path in paths if path.exists())


@dataclass
class Repacked:
    """A collection's result and, when it removed everything unreachable it found older
    than the cutoff, what the forks' storage ledgers settle to (`quota.py`): each fork's
    kept bytes, and each pack's bytes that nothing reaches (0 for the packs it deleted
    because the new pack holds them)."""

    collection: PackCollection = field(default_factory=PackCollection)
    kept_by_fork: dict[str, int] | None = None
    unreached: dict[str, int] = field(default_factory=dict)


def repack(
    objects_dir: Path,
    tips: Callable[[], Tips],
    extra_tips: Iterable[bytes],
    written_before: float,
    lock: MaintenanceLock,
    *,
    limit: int,
    dry_run: bool,
) -> Repacked:
    """Repack `objects_dir` and prune what was written before `written_before` (a Unix
    time) and is unreachable. Raises ReachTooLarge past `limit`, having removed nothing.
    One at a time per project (`REPACK_LOCK_NAME`): a second would read packs the first
    deletes."""
    before = dict(tips())  # read first: what is stored after this is newer than the listing
    store = DiskObjectStore(str(objects_dir))
    with closing(store):
        packs = _complete_packs(store, written_before)
        loose = _old_loose(objects_dir, written_before)
        walk = _Walk(store, limit)
        canonical = walk.add(before.get(None, []))  # each fork's walk stops at canonical's
        exclusive = {
            fork: walk.add(shas, canonical) for fork, shas in before.items() if fork is not None
        }
        walk.add(list(extra_tips))
        reached = walk.seen
        plan = _Plan.of(packs, loose, reached)
        if plan.idle:
            return Repacked() if dry_run else _measured(store, exclusive, reached)
        if dry_run:
            return Repacked(PackCollection(sorted(plan.packs)))
        keep = plan.keep(reached)
        written = store.add_pack_data(
            len(keep), generate_unpacked_objects(store, [(ObjectID(sha), None) for sha in keep])
        )
        kept = None if written is None else Path(written.data.filename).stem
    new = [] if kept is None or kept in packs else _pack_files(store, kept)
    with lock.exclusive(LOCK_WAIT_SECONDS) as alone:
        if not alone:
            return Repacked()  # a request outlasted the wait: the next round deletes
        whole = _tips_set(tips()) <= _tips_set(before)
        if not whole:
            # A ref names what the walk did not start from: only what the new pack holds
            # goes; what the walk saw as unreachable waits for the next round.
            plan = _Plan(plan.covered, {}, {})
        removed, freed, complete = _delete(plan, kept, written_before)
    collection = PackCollection(removed, freed - _size(new))
    if not (whole and complete):
        return Repacked(collection)
    store = DiskObjectStore(str(objects_dir))
    with closing(store):
        measured = _measured(store, exclusive, reached)
    measured.collection = collection
    measured.unreached.update(dict.fromkeys(plan.covered, 0))
    return measured


def _tips_set(tips: Tips) -> set[bytes]:
    return {sha for shas in tips.values() for sha in shas}


def _delete(plan: _Plan, kept: str | None, written_before: float) -> tuple[list[str], int, bool]:
    """Delete the replaced packs (but the new one) and loose objects: those with
    unreachable objects only if still older than the cutoff. Their names and bytes, and
    whether every one planned went."""
    aged = {name: pack for name, pack in plan.aged.items() if _older(pack.files, written_before)}
    packs = {name: pack.files for name, pack in {**plan.covered, **aged}.items() if name != kept}
    loose = [path for path in plan.loose.values() if _older([path], written_before)]
    files = [*(path for paths in packs.values() for path in paths), *loose]
    freed = _size(files)
    for path in files:  # each pack's index before its data: readers stop finding it
        path.unlink(missing_ok=True)
    complete = len(aged) == len(plan.aged) and len(loose) == len(plan.loose)
    return sorted(packs), freed, complete


def _pack_files(store: DiskObjectStore, name: str) -> list[Path]:
    pack_dir = Path(store.pack_dir)
    return [pack_dir / f"{name}.idx", pack_dir / f"{name}.pack"]


# --- what each fork keeps ----------------------------------------------------------------
class _Walk:
    """Reachability from several sets of tips (`seen`: all they reach). Each walk stops
    at `stop` (by default, what earlier walks reached); `limit` bounds the objects all the
    walks note together (ReachTooLarge past it). Blobs are never read; a missing object
    counts as reached (keeping too much is the safe side)."""

    def __init__(self, objects: DiskObjectStore, limit: int) -> None:
        self._objects = objects
        self._limit = limit
        self._spent = 0
        self.seen: set[bytes] = set()

    def add(self, tips: Iterable[bytes], stop: set[bytes] | None = None) -> set[bytes]:
        """Walk from `tips` up to `stop`; the objects reached beyond it."""
        stop = self.seen if stop is None else stop
        found: set[bytes] = set()
        pending = [sha for sha in tips if sha not in stop]
        while pending:
            sha = pending.pop()
            if sha in found or sha in stop:
                continue
            self._note(sha, found)
            for child, is_blob in self._children(sha):
                if child in found or child in stop:
                    continue
                if is_blob:
                    self._note(child, found)
                else:
                    pending.append(child)
        return found

    def _note(self, sha: bytes, found: set[bytes]) -> None:
        self._spent += 1
        if self._spent > self._limit:
            raise ReachTooLarge(f"more than {self._limit} objects are reachable")
        self.seen.add(sha)
        found.add(sha)

    def _children(self, sha: bytes) -> list[tuple[bytes, bool]]:
        try:
            found = self._objects[ObjectID(sha)]
        except KeyError:
            return []
        if isinstance(found, Commit):
            return [(found.tree, False), *((parent, False) for parent in found.parents)]
        if isinstance(found, Tag):
            return [(found.object[1], False)]
        if isinstance(found, Tree):
            return [
                (entry.sha, not stat.S_ISDIR(entry.mode))
                for entry in found.iteritems()
                if stat.S_IFMT(entry.mode) != 0o160000  # a submodule's commit is not ours
            ]
        return []


def _measured(
    store: DiskObjectStore, wanted: Mapping[str, set[bytes]], reached: set[bytes]
) -> Repacked:
    """Each fork's objects' packed bytes, and each pack's unreached bytes, from the pack
    indexes' offsets (an object stored twice counts once for a fork; a loose object counts
    nothing)."""
    union = set().union(*wanted.values()) if wanted else set()
    sizes: dict[bytes, int] = {}
    unreached: dict[str, int] = {}
    for pack, entries in _pack_entries(store):
        ends = [offset for offset, _ in entries[1:]] + [pack.stat().st_size - _TRAILER]
        lost = 0
        for (offset, sha), end in zip(entries, ends, strict=True):
            if sha in union and sha not in sizes:
                sizes[sha] = end - offset
            elif sha not in reached:
                lost += end - offset
        unreached[pack.stem] = lost
    kept = {fork: sum(sizes.get(sha, 0) for sha in shas) for fork, shas in wanted.items()}
    return Repacked(kept_by_fork=kept, unreached=unreached)


def _pack_entries(store: DiskObjectStore) -> Iterator[tuple[Path, list[tuple[int, bytes]]]]:
    for pack in sorted(Path(store.pack_dir).glob("*.pack")):
        try:
            index = load_pack_index(str(pack.with_suffix(".idx")), store.object_format)
        except FileNotFoundError:
            continue
        with closing(index):
            entries = sorted(
                (offset, bytes(name).hex().encode("ascii"))
                for name, offset, _ in index.iterentries()
            )
        yield pack, entries


# --- consolidation after a push ------------------------------------------------------------
@dataclass(frozen=True)
class Consolidation:
    """What one consolidation merged: packs by name, objects and bytes written."""

    merged: list[str] = field(default_factory=list)
    objects: int = 0
    bytes_written: int = 0


def consolidate(objects_dir: Path, lock: MaintenanceLock, *, most: int) -> Consolidation:
    """Merge every pack but the largest ones in geometric progression (at most `most` of
    them) into one pack, reachable objects or not, without a walk (see the module). The
    merged packs are deleted once no request is in flight (or left for the next round)."""
    store = DiskObjectStore(str(objects_dir))
    with closing(store):
        packs = _complete_packs(store, 0.0)
        base = set(_base_packs(packs, 0, most))
        merged = {name: pack for name, pack in packs.items() if name not in base}
        if len(merged) < 2:
            return Consolidation()
        ids = sorted({sha for pack in merged.values() for sha in pack.ids})
        written = store.add_pack_data(
            len(ids), generate_unpacked_objects(store, [(ObjectID(sha), None) for sha in ids])
        )
    if written is None:
        return Consolidation()
    kept = Path(written.data.filename).stem
    new = _pack_files(store, kept)
    newest = max(pack.mtime for pack in merged.values())
    for path in new:  # its objects are as young as the youngest pack it replaces
        os.utime(path, (newest, newest))
    gone = sorted(name for name in merged if name != kept)
    with lock.exclusive(LOCK_WAIT_SECONDS) as alone:
        if alone:
            for name in gone:
                for path in merged[name].files:
                    path.unlink(missing_ok=True)
    return Consolidation(gone if alone else [], len(ids), _size(new))
