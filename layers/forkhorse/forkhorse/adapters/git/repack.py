"""Local repack and prune of one project's objects directory (canonical's and every fork's).

What is reachable from any repository's refs, or from the extra tips (reviews' commits),
is copied into one new pack (deltas reused where their base comes along) before anything
is deleted; then the packs and loose objects written before the cutoff go. Anything newer
is never touched: a push in flight has its pack, or a just-written object, newer than that.

A push that completes during the walk may point a ref at objects the walk saw as
unreachable (say, a fork's history pushed again). So deletion happens under the project's
maintenance lock, held exclusively, which every smart-HTTP request holds shared for its
whole length, and only if every ref still names a tip the walk started from; otherwise the
round deletes nothing and the next one tries again.
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
class _Old:
    """Packs and loose objects written before the cutoff: (files, object ids) by name."""

    packs: dict[str, tuple[list[Path], list[bytes]]]
    loose: dict[bytes, Path]

    def ids(self) -> Iterator[bytes]:
        for _, ids in self.packs.values():
            yield from ids
        yield from self.loose


def _older(paths: Iterable[Path], cutoff: float) -> bool:
    try:
        return all(path.stat().st_mtime < cutoff for path in paths)
    except FileNotFoundError:
        return False


def _old_packs(store: DiskObjectStore, cutoff: float) -> dict[str, tuple[list[Path], list[bytes]]]:
    pack_dir = Path(store.pack_dir)
    found: dict[str, tuple[list[Path], list[bytes]]] = {}
    for pack in sorted(pack_dir.glob("*.pack")):
        files = [pack.with_suffix(".idx"), pack]
        if not _older(files, cutoff):
            continue  # newer, or a pack still being written (no index yet)
        with closing(load_pack_index(str(files[0]), store.object_format)) as index:
            found[pack.stem] = (files, [bytes(sha) for sha in index])
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
    old = _Old(_old_packs(store, written_before), _old_loose(objects_dir, written_before))
    reached = reachable(store, [*before, *extra_tips], limit)
    keep = sorted({sha for sha in old.ids() if sha in reached})
    unreachable = len(set(old.ids())) > len(keep)
    if not unreachable and not old.loose and len(old.packs) < 2:
        return PackCollection()  # already one pack of live objects
    if dry_run:
        return PackCollection(sorted(old.packs))
    written = store.add_pack_data(
        len(keep), generate_unpacked_objects(store, [(ObjectID(sha), None) for sha in keep])
    )
    kept = None if written is None else Path(written.data.filename).stem
    new = [] if kept is None or kept in old.packs else _pack_files(store, kept)
    with lock.exclusive(LOCK_WAIT_SECONDS) as alone:
        if not alone or not set(tips()) <= before:
            # A request outlasted the wait, or a ref names what the walk did not start
            # from: the next round deletes (the consolidated pack then is old, and kept).
            return PackCollection()
        removed, freed = _delete_old(old, kept, written_before)
    return PackCollection(removed, freed - _size(new))


def _delete_old(old: _Old, kept: str | None, written_before: float) -> tuple[list[str], int]:
    """Delete the old packs (but the consolidated one) and loose objects, each still older
    than the cutoff; their names and bytes."""
    packs = {
        name: paths
        for name, (paths, _) in old.packs.items()
        if name != kept and _older(paths, written_before)
    }
    loose = [path for path in old.loose.values() if _older([path], written_before)]
    files = [*(path for paths in packs.values() for path in paths), *loose]
    freed = _size(files)
    for path in files:  # each pack's index before its data: readers stop finding it
        path.unlink(missing_ok=True)
    return sorted(packs), freed


def _pack_files(store: DiskObjectStore, name: str) -> list[Path]:
    pack_dir = Path(store.pack_dir)
    return [pack_dir / f"{name}.idx", pack_dir / f"{name}.pack"]
