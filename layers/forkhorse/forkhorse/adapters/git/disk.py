"""Disk GitStore, the local default: bare repositories under the state directory.

Layout, per project: `git/<project>/objects/` holds every object; `canonical.git/` and
`forks/<fork>.git/` are bare repositories whose `objects` is a symlink to it, so plain
`git` works on them for inspection. Refs are loose files under dulwich's lock-file
protocol, so a compare-and-set is atomic across threads and processes.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dulwich.object_store import DiskObjectStore
from dulwich.objects import ObjectID, valid_hexsha
from dulwich.refs import DiskRefsContainer, Ref, RefsContainer
from dulwich.repo import Repo

from forkhorse.adapters.git.ingest.session import SessionPackReceiver, sweep_stale_spools
from forkhorse.adapters.git.quota import ForkQuota, StorageLedger, fork_storage_limits
from forkhorse.adapters.git.reach import DEFAULT_REACH_LIMIT
from forkhorse.adapters.git.repack import (
    LOCK_NAME,
    REPACK_LOCK_NAME,
    Consolidation,
    MaintenanceLock,
    Tips,
    consolidate,
    repack,
)
from forkhorse.adapters.git.store import HEAD, DulwichGitStore
from forkhorse.domain.git_access import is_valid_repo_name
from forkhorse.domain.limits import GIT
from forkhorse.ports.git import (
    ARCHIVE_URL_TTL_SECONDS,
    DEFAULT_BRANCH,
    ArchiveLink,
    PackCollection,
)

log = logging.getLogger(__name__)


# How many projects' stores `DiskGitHost` keeps open at once, and how long one nobody asks
# for stays open. The idle period is short: a quiet server's open files settle back within
# it (the live FD test waits up to 30 s for that).
CACHED_PROJECTS = 4
IDLE_CLOSE_SECONDS = 5.0


class DiskGitHost:
    """Every project's repositories under `<state_dir>/git`.

    `store(project)` hands back the same `DiskGitStore` for a project while it is in use, so
    its open packs (and parsed indexes) and its snapshot cache serve every request and run
    step; building one per call had each first lookup open and parse every pack index. The
    store is shared between threads: its reads take its lock (`DulwichGitStore`).

    Bounded: at most `cached_projects` stores are kept (the least recently asked for is
    dropped past that), and one nobody asked for during `idle_seconds` is dropped by one
    daemon thread, which exits when nothing is cached. A dropped store's packs are closed
    under its lock, so a thread still holding it reads on: dulwich reopens packs lazily on
    its next lookup, and closes them when that holder lets the store go (no reference cycle
    keeps one alive). A repack through a store closes its packs (`DiskGitStore.repack`); a
    repack by another process is noticed on the next miss (dulwich rescans the pack
    directory and closes the packs whose files went) or at the idle close.

    The open files this costs. A kept store holds each pack it has opened: its index and
    its data, 2 files, each open twice (the file, and the duplicate descriptor its mmap
    keeps), so 4 descriptors. Its packs are at most those of its project's pack directory
    when it last looked, and consolidation (`DiskGitStore.pushed`) brings that back to at
    most `packs_per_project` // 2 + 1 (`repack.consolidate`): more only while one runs,
    by the pushes that land meanwhile, and packs a repack in another process deleted until
    the store's next miss. So at most `cached_projects` x (`packs_per_project` + 1) x 2
    files, 4 descriptors a pack, outside those windows; none once the idle period passes
    with nobody asking. A store dropped while a thread still uses it adds its own packs
    until that thread lets go (bounded by the threads that hold one: HTTP and supervisor).
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        cached_projects: int = CACHED_PROJECTS,
        idle_seconds: float = IDLE_CLOSE_SECONDS,
    ) -> None:
        self._root = state_dir / "git"
        self._archives = state_dir / "archives"
        self._cached_projects = cached_projects
        self._idle_seconds = idle_seconds
        self._changed = threading.Condition(threading.Lock())
        self._stores: OrderedDict[str, _Cached] = OrderedDict()  # least recently asked first
        self._reaper: threading.Thread | None = None
        self._closed = False

    def store(self, project: str) -> DiskGitStore:
        if not is_valid_repo_name(project):
            raise ValueError("Invalid project id.")
        dropped: list[DiskGitStore] = []
        with self._changed:
            if self._closed:  # shut down: a store of its own, as each caller had before
                return DiskGitStore(project, self._root / project, self._archives)
            cached = self._stores.get(project)
            if cached is None:
                cached = _Cached(DiskGitStore(project, self._root / project, self._archives))
                self._stores[project] = cached
            self._stores.move_to_end(project)
            cached.used = time.monotonic()
            while len(self._stores) > self._cached_projects:
                dropped.append(self._stores.popitem(last=False)[1].store)
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._close_idle, name=f"idle-close {self._root}", daemon=True
                )
                self._reaper.start()
        for store in dropped:
            store.close_packs()
        return cached.store

    def cached(self) -> list[str]:
        """The projects whose stores are kept, least recently asked for first."""
        with self._changed:
            return list(self._stores)

    def close(self) -> None:
        """Stop the idle-close thread and close every kept store's packs. Later calls to
        `store` get a store of their own, not kept."""
        with self._changed:
            self._closed = True
            stores = [cached.store for cached in self._stores.values()]
            self._stores.clear()
            reaper = self._reaper
            self._changed.notify_all()
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join()
        for store in stores:
            store.close_packs()

    def _close_idle(self) -> None:
        """The idle-close thread: drops the stores idle for `idle_seconds`; exits once none
        is kept (`store` starts it again)."""
        while True:
            with self._changed:
                now = time.monotonic()
                idle = [
                    project
                    for project, cached in self._stores.items()
                    if now - cached.used >= self._idle_seconds
                ]
                expired = [self._stores.pop(project).store for project in idle]
                if not expired:
                    if self._closed or not self._stores:
                        self._reaper = None
                        return
                    oldest = min(cached.used for cached in self._stores.values())
                    self._changed.wait(oldest + self._idle_seconds - now)
                    continue
            for store in expired:  # outside the host's lock: a reader may hold the store's
                store.close_packs()

    def collect_packs(
        self,
        project_id: str,
        forks: Iterable[str],
        extra_tips: Iterable[str],
        written_before: datetime,
        *,
        dry_run: bool,
    ) -> PackCollection:
        """Repack the project's repositories and prune their unreachable objects (see
        `repack`); every fork on disk counts, whatever `forks` lists."""
        if not (self._root / project_id / "canonical.git").is_dir():
            return PackCollection()
        return self.store(project_id).repack(extra_tips, written_before, dry_run=dry_run)


@dataclass
class _Cached:
    store: DiskGitStore
    used: float = 0.0  # time.monotonic() when `DiskGitHost.store` last handed it out


def _consolidate(store: DiskGitStore) -> None:
    """Merge the project's packs but its largest, geometrically sized ones into one
    (`repack.consolidate`: no walk, unreachable objects included, which the collector
    removes once their grace period has passed)."""
    try:
        store.consolidate()
    except Exception:
        log.exception("consolidating the packs of project %s failed", store.project)
    finally:
        with _consolidating_lock:
            _consolidating.discard(store.objects_dir)


_consolidating: set[Path] = set()
_consolidating_lock = threading.Lock()


class _DiskObjects(SessionPackReceiver, DiskObjectStore):
    """The project's objects directory; a push arrives through its request's `PushSession`."""


_swept: set[Path] = set()
_swept_lock = threading.Lock()


class DiskGitStore(DulwichGitStore):
    def __init__(self, project: str, root: Path, archives: Path) -> None:
        objects_dir = root / "objects"
        if not objects_dir.is_dir():
            objects_dir.mkdir(parents=True, exist_ok=True)
            DiskObjectStore.init(objects_dir)
        _sweep_once(objects_dir)
        super().__init__(project, _DiskObjects(str(objects_dir)))
        self._root = root
        self._archives = archives

    def _open_objects(self) -> _DiskObjects:
        return _DiskObjects(str(self.objects_dir))

    @property
    def objects_dir(self) -> Path:
        return self._root / "objects"

    def pack_count(self) -> int:
        return sum(1 for _ in (self.objects_dir / "pack").glob("*.pack"))

    def pushed(self) -> None:
        """Past `GitLimits.packs_per_project`, consolidate in the background: one thread per
        project at a time here, and one repack or consolidation per project across
        processes (its lock)."""
        if self.pack_count() <= GIT.packs_per_project:
            return
        with _consolidating_lock:
            if self.objects_dir in _consolidating:
                return
            _consolidating.add(self.objects_dir)
        threading.Thread(
            target=_consolidate, args=(self,), name=f"consolidate-{self.project}", daemon=True
        ).start()

    @property
    def maintenance(self) -> MaintenanceLock:
        return MaintenanceLock(self._root / LOCK_NAME)

    def serving(self) -> AbstractContextManager[None]:
        """Held by every smart-HTTP request: a repack deletes only while none is in flight."""
        return self.maintenance.shared()

    def consolidate(self) -> Consolidation:
        """Merge packs (see `repack.consolidate`); nothing while a repack or another
        consolidation of this project runs. Logs what it wrote."""
        with MaintenanceLock(self._root / REPACK_LOCK_NAME).exclusive(0) as alone:
            if not alone:
                return Consolidation()
            done = consolidate(self.objects_dir, self.maintenance, most=GIT.packs_per_project // 2)
        if done.merged:
            self.close_packs()
        if done.objects:
            log.info(
                "consolidated %d packs of project %s: %d objects, %d bytes written",
                len(done.merged),
                self.project,
                done.objects,
                done.bytes_written,
            )
        return done

    def repack(
        self,
        extra_tips: Iterable[str],
        written_before: datetime,
        *,
        dry_run: bool,
        limit: int = DEFAULT_REACH_LIMIT,
    ) -> PackCollection:
        """Nothing while another repack of this project runs (see `repack`). Closes this
        store's packs when it deleted some. A collection that measured what each fork keeps
        settles the forks' storage ledgers (`quota.py`)."""
        extra = [tip.encode("ascii") for tip in extra_tips if valid_hexsha(tip)]
        cutoff = written_before.timestamp()
        with MaintenanceLock(self._root / REPACK_LOCK_NAME).exclusive(0) as alone:
            if not alone:
                return PackCollection()
            done = repack(
                self.objects_dir,
                self._tips_by_repo,
                extra,
                cutoff,
                self.maintenance,
                limit=limit,
                dry_run=dry_run,
            )
        if done.collection.packs and not dry_run:
            # This store may be the host's shared one: the deleted packs' files stay open
            # (and their disk space taken) while it holds them. Its next lookup reopens
            # what is left, the consolidated pack first among them.
            self.close_packs()
        for fork, kept in (done.kept_by_fork or {}).items():
            if self.exists(fork):
                StorageLedger(self.repo_path(fork)).settle(kept, cutoff, done.unreached)
        return done.collection

    def _fork_quota(self, fork: str) -> ForkQuota:
        return ForkQuota(
            lambda: len(self.refs(fork)),
            StorageLedger(self.repo_path(fork)),
            fork_storage_limits(),
        )

    def _tips_by_repo(self) -> Tips:
        """Every ref target of canonical (None) and of every fork on disk, by repository."""
        forks = sorted(path.name[: -len(".git")] for path in (self._root / "forks").glob("*.git"))
        return {repo: self._tips([repo]) for repo in [None, *forks]}

    def repo_path(self, fork: str | None) -> Path:
        return (
            self._root / "canonical.git" if fork is None else self._root / "forks" / f"{fork}.git"
        )

    def exists(self, fork: str | None = None) -> bool:
        return (self.repo_path(fork) / "HEAD").is_file()

    def publish_archive(self, commit: str, deadline: float | None = None) -> ArchiveLink:
        """Locally the archive is a file under the state dir, named by its commit SHA (its
        `.git` holds the commit's history, so two commits of one tree differ)."""
        snapshot = self.open_snapshot(commit)
        self._archives.mkdir(parents=True, exist_ok=True)
        target = self._archives / f"{snapshot.commit}.tar"
        if not target.exists():
            with tempfile.NamedTemporaryFile(dir=self._archives, delete=False) as partial:
                try:
                    snapshot.export_tar(partial.file, deadline)
                except BaseException:
                    os.unlink(partial.name)  # a refused archive leaves nothing behind
                    raise
            os.replace(partial.name, target)
        return ArchiveLink(snapshot.tree, target.as_uri(), ARCHIVE_URL_TTL_SECONDS)

    def _refs_container(self, fork: str | None) -> RefsContainer:
        return DiskRefsContainer(str(self.repo_path(fork)))

    def _create_repo(self, fork: str | None, initial_head: bytes | None) -> bool:
        final = self.repo_path(fork)
        if final.exists():
            return False
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".new-", dir=final.parent))
        try:
            self._init_bare(staging, initial_head)
            os.rename(staging, final)  # atomic; fails when another creator won
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if final.exists():
                return False
            raise
        return True

    def _init_bare(self, path: Path, initial_head: bytes | None) -> None:
        Repo.init_bare(str(path)).close()
        shutil.rmtree(path / "objects")
        os.symlink(os.path.relpath(self._root / "objects", path), path / "objects")
        refs = DiskRefsContainer(str(path))
        refs.set_symbolic_ref(HEAD, Ref(DEFAULT_BRANCH.encode("ascii")))
        if initial_head is not None:
            refs.add_if_new(Ref(DEFAULT_BRANCH.encode("ascii")), ObjectID(initial_head))


def _sweep_once(objects_dir: Path) -> None:
    """The first time this process opens a project's store: remove the temporary packs of
    pushes a crash interrupted (those older than the grace period, so none in progress)."""
    with _swept_lock:
        if objects_dir in _swept:
            return
        _swept.add(objects_dir)
    sweep_stale_spools(objects_dir)
