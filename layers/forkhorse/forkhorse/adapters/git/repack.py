"""Local repack and prune of one project's objects directory (canonical's and every fork's).

What is reachable from any repository's refs, or from the extra tips (reviews' commits),
is copied into one new pack (deltas reused where their base comes along) before anything
is deleted; then the packs and loose objects written before the cutoff go, and so does
every pack, whatever its age, whose objects are all reached (the new pack holds them all).
Anything else newer is never touched: a push in flight has its pack, or a just-written
object, newer than that, and the objects it brings are not reached yet.

A push that completes during the walk may point a ref at objects the walk saw as
unreachable (say, a fork's history pushed again). So deletion happens under the project's
maintenance lock, held exclusively, which every smart-HTTP request holds shared for its
whole length, and what the walk saw as unreachable goes only if every ref still names a tip
the walk started from; otherwise only the packs the new pack wholly holds go, and the next
round tries again.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from dulwich.object_store import DiskObjectStore
from dulwich.objects import ObjectID
from dulwich.pack import generate_unpacked_objects, load_pack_index

from forkhorse.adapters.git.reach import reachable
from forkhorse.ports.git import PackCollection

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


@dataclass(frozen=True)
class _Pack:
    """One complete pack: its files, its object ids, and whether it predates the cutoff."""

    files: list[Path]
    ids: list[bytes]
    old: bool


@dataclass(frozen=True)
class _Plan:
    """What a repack replaces with its consolidated pack."""

    covered: dict[str, _Pack]  # every object reached: the new pack holds them all, any age
    aged: dict[str, _Pack]  # written before the cutoff, holding unreachable objects
    loose: dict[bytes, Path]  # written before the cutoff

    @classmethod
    def of(cls, packs: dict[str, _Pack], loose: dict[bytes, Path], reached: set[bytes]) -> _Plan:
        covered = {
            name: pack for name, pack in packs.items() if all(sha in reached for sha in pack.ids)
        }
        aged = {name: pack for name, pack in packs.items() if pack.old and name not in covered}
        return cls(covered, aged, loose)

    @property
    def packs(self) -> dict[str, _Pack]:
        return {**self.covered, **self.aged}

    @property
    def idle(self) -> bool:
        """Nothing to prune, and at most one pack of live objects: already consolidated."""
        return not self.aged and not self.loose and len(self.covered) < 2

    def keep(self, reached: set[bytes]) -> list[bytes]:
        """The reached objects of what is replaced: the consolidated pack's."""
        ids = {sha for pack in self.packs.values() for sha in pack.ids} | set(self.loose)
        return sorted(ids & reached)


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
        except FileNotFoundError:
            continue
        with closing(index):
            ids = [bytes(sha) for sha in index]
        found[pack.stem] = _Pack(files, ids, _older(files, cutoff))
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


def repack(
    objects_dir: Path,
    tips: Callable[[], list[bytes]],
    extra_tips: Iterable[bytes],
    written_before: float,
    lock: MaintenanceLock,
    *,
    limit: int,
    dry_run: bool,
) -> PackCollection:
    """Repack `objects_dir` and prune what was written before `written_before` (a Unix
    time) and is unreachable. Raises ReachTooLarge past `limit`, having removed nothing.
    One at a time per project (`REPACK_LOCK_NAME`): a second would read packs the first
    deletes."""
    before = set(tips())  # read first: what is stored after this is newer than the listing
    store = DiskObjectStore(str(objects_dir))
    with closing(store):
        packs = _complete_packs(store, written_before)
        loose = _old_loose(objects_dir, written_before)
        reached = reachable(store, [*before, *extra_tips], limit)
        plan = _Plan.of(packs, loose, reached)
        if plan.idle:
            return PackCollection()
        if dry_run:
            return PackCollection(sorted(plan.packs))
        keep = plan.keep(reached)
        written = store.add_pack_data(
            len(keep), generate_unpacked_objects(store, [(ObjectID(sha), None) for sha in keep])
        )
        kept = None if written is None else Path(written.data.filename).stem
    new = [] if kept is None or kept in packs else _pack_files(store, kept)
    with lock.exclusive(LOCK_WAIT_SECONDS) as alone:
        if not alone:
            return PackCollection()  # a request outlasted the wait: the next round deletes
        if not set(tips()) <= before:
            # A ref names what the walk did not start from: only what the new pack holds
            # goes; what the walk saw as unreachable waits for the next round.
            plan = _Plan(plan.covered, {}, {})
        removed, freed = _delete(plan, kept, written_before)
    return PackCollection(removed, freed - _size(new))


def _delete(plan: _Plan, kept: str | None, written_before: float) -> tuple[list[str], int]:
    """Delete the replaced packs (but the consolidated one) and loose objects: those with
    unreachable objects only if still older than the cutoff. Their names and bytes."""
    aged = {name: pack for name, pack in plan.aged.items() if _older(pack.files, written_before)}
    packs = {name: pack.files for name, pack in {**plan.covered, **aged}.items() if name != kept}
    loose = [path for path in plan.loose.values() if _older([path], written_before)]
    files = [*(path for paths in packs.values() for path in paths), *loose]
    freed = _size(files)
    for path in files:  # each pack's index before its data: readers stop finding it
        path.unlink(missing_ok=True)
    return sorted(packs), freed


def _pack_files(store: DiskObjectStore, name: str) -> list[Path]:
    pack_dir = Path(store.pack_dir)
    return [pack_dir / f"{name}.idx", pack_dir / f"{name}.pack"]
