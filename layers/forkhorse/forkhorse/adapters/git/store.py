"""The GitStore behaviour shared by the disk and S3/DynamoDB adapters.

A project's canonical repository and its forks share one object store (objects are
content-addressed) and each has its own refs. Visibility is a rule, not a property of the
store: a repository shows what its refs (and canonical's) reach, the smart-HTTP server
only serves that, and a push may only reference what the pusher could already read or what
its own pack carries (`forkhorse.adapters.git.ingest`). Reads go by exact SHA only.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

from dulwich.config import ConfigFile, StackedConfig
from dulwich.errors import HookError, ObjectFormatException
from dulwich.file import FileLocked
from dulwich.hooks import Hook
from dulwich.object_store import PackBasedObjectStore
from dulwich.objects import Commit, ObjectID, Tree, valid_hexsha
from dulwich.refs import Ref, RefsContainer
from dulwich.repo import BaseRepo

from forkhorse.adapters.git.ingest import PushRefused
from forkhorse.adapters.git.ingest.refnames import ref_name_problem
from forkhorse.adapters.git.ingest.session import PushSession, SessionPackReceiver
from forkhorse.adapters.git.probe import probe_object, read_raw
from forkhorse.adapters.git.quota import ForkQuota, fork_storage_limits
from forkhorse.adapters.git.snapshot import DulwichSnapshot
from forkhorse.domain.git_access import CanonicalWriteCapability, is_valid_repo_name
from forkhorse.domain.snapshot import SnapshotUnavailable
from forkhorse.ports.git import DEFAULT_BRANCH, ArchiveLink, CommitInfo, TreeEntry

ZERO_SHA = ObjectID(b"0" * 40)
HEAD = Ref(b"HEAD")
_COMMIT = 1
_TREE = 2
_BLOB = 3
_SNAPSHOT_CACHE = 64
MAX_PUSH_BYTES = 50 * 1024 * 1024


class RepoNotFound(LookupError):
    """The project's canonical repository or the named fork does not exist."""


class InvalidRefUpdate(ValueError):
    """A ref name or target that Forkhorse never writes."""


class DulwichGitStore(ABC):
    """GitStore over one shared dulwich object store; subclasses supply refs and storage."""

    max_push_bytes: ClassVar[int] = MAX_PUSH_BYTES

    def __init__(self, project: str, objects: PackBasedObjectStore) -> None:
        if not is_valid_repo_name(project):
            raise ValueError("Invalid project id.")
        self._project = project
        self._objects = objects
        self._lock = threading.RLock()
        self._snapshots: OrderedDict[str, DulwichSnapshot] = OrderedDict()

    # Storage-specific parts -------------------------------------------------------------
    @abstractmethod
    def exists(self, fork: str | None = None) -> bool:
        """Whether canonical (fork None) or that fork exists."""

    @abstractmethod
    def _refs_container(self, fork: str | None) -> RefsContainer:
        """The refs of canonical or of one fork."""

    @abstractmethod
    def _create_repo(self, fork: str | None, initial_head: bytes | None) -> bool:
        """Create the repo's refs (HEAD -> main, main at `initial_head`); False if it exists."""

    @abstractmethod
    def _open_objects(self) -> PackBasedObjectStore:
        """A fresh view of the shared object store (a `SessionPackReceiver`) for one request."""

    @abstractmethod
    def pushed(self) -> None:
        """Called after each push request, its lock released: where packs are bounded."""

    @abstractmethod
    def publish_archive(self, commit: str, deadline: float | None = None) -> ArchiveLink:
        """Store the exact tree's archive where a full check can fetch it, by `deadline`."""

    # GitStore ---------------------------------------------------------------------------
    @property
    def project(self) -> str:
        return self._project

    @property
    def objects(self) -> PackBasedObjectStore:
        return self._objects

    def create_canonical(self) -> None:
        self._create_repo(None, None)

    def create_fork(self, fork: str) -> str | None:
        if not is_valid_repo_name(fork):
            raise ValueError("Invalid fork id.")
        head = self.head()
        if not self._create_repo(fork, head.encode("ascii") if head else None):
            raise FileExistsError("The fork already exists.")
        return head

    def refs(self, fork: str | None = None) -> dict[str, str]:
        container = self._existing_refs(fork)
        return {
            name.decode("utf-8"): sha.decode("ascii")
            for name, sha in container.as_dict().items()
            if name != HEAD
        }

    def head(self, fork: str | None = None, ref: str = DEFAULT_BRANCH) -> str | None:
        value = self._existing_refs(fork).read_ref(Ref(ref.encode("utf-8")))
        if value is None or value.startswith(b"ref: "):
            return None
        return value.decode("ascii")

    def read_commit(self, sha: str) -> CommitInfo:
        commit = self._parsed(sha, _COMMIT, Commit)
        return CommitInfo(
            sha=sha,
            tree=commit.tree.decode("ascii"),
            parents=tuple(parent.decode("ascii") for parent in commit.parents),
        )

    def read_tree(self, sha: str) -> tuple[TreeEntry, ...]:
        tree = self._parsed(sha, _TREE, Tree)
        return tuple(
            TreeEntry(name=item.path, mode=item.mode, sha=item.sha.decode("ascii"))
            for item in tree.iteritems()
        )

    def read_blob(self, sha: str) -> bytes:
        with self._lock:
            if probe_object(self._objects, sha, 0).type_num != _BLOB:
                raise SnapshotUnavailable()
            return read_raw(self._objects, sha)

    def update_fork_ref(self, fork: str, ref: str, old: str | None, new: str | None) -> bool:
        return self._compare_and_set(self._existing_refs(fork), ref, old, new)

    def update_canonical_ref(
        self, capability: CanonicalWriteCapability, ref: str, old: str | None, new: str | None
    ) -> bool:
        if not isinstance(capability, CanonicalWriteCapability):
            raise PermissionError("Only the promote path writes canonical.")
        if capability.project != self._project:
            raise PermissionError("The capability belongs to another project.")
        return self._compare_and_set(self._existing_refs(None), ref, old, new)

    def close_packs(self) -> None:
        """Close the packs and indexes this store has open, under its lock, so no read is
        cut off halfway; the next lookup reopens what it needs (dulwich rescans the pack
        directory on a miss). Safe while other threads still hold the store."""
        with self._lock:
            self._objects.close()

    def open_snapshot(self, commit: str) -> DulwichSnapshot:
        with self._lock:
            cached = self._snapshots.get(commit)
            if cached is not None:
                self._snapshots.move_to_end(commit)
                return cached
        snapshot = DulwichSnapshot(self._objects, commit, self._lock)
        with self._lock:
            self._snapshots[commit] = snapshot
            while len(self._snapshots) > _SNAPSHOT_CACHE:
                self._snapshots.popitem(last=False)
        return snapshot

    def serving(self) -> AbstractContextManager[None]:
        """Held for the length of one smart-HTTP request; the disk store's keeps a repack
        from deleting anything while the request is in flight."""
        return nullcontext()

    def served_repo(self, fork: str | None) -> ServedRepo:
        """A dulwich repository view for one smart-HTTP request.

        It has its own view of the object store, whose pushes go through a `PushSession`:
        bounded ingestion, and connectivity against what canonical's refs and this
        repository's refs reach (the pusher's own fork; canonical for its import).
        """
        refs = self._existing_refs(fork)
        objects = self._open_objects()
        quota = None if fork is None else self._fork_quota(fork)
        session = PushSession(lambda: self._readable_tips(fork), quota=quota)
        if isinstance(objects, SessionPackReceiver):
            objects.push_session = session
        return ServedRepo(objects, refs, self.max_push_bytes, session)

    def _fork_quota(self, fork: str) -> ForkQuota:
        """A push's view of the fork's quota (`quota.py`): its ref count here; the disk
        store adds its byte ledger."""
        return ForkQuota(lambda: len(self.refs(fork)), limits=fork_storage_limits())

    def _readable_tips(self, fork: str | None) -> list[bytes]:
        """Every ref target a pusher to `fork` may already read: canonical's and the fork's."""
        return self._tips(dict.fromkeys([None, fork]))

    def _tips(self, repos: Iterable[str | None]) -> list[bytes]:
        """Every ref target of these repositories (canonical is None)."""
        tips: set[bytes] = set()
        for repo in repos:
            for name, sha in self._existing_refs(repo).as_dict().items():
                if name != HEAD and valid_hexsha(sha):
                    tips.add(bytes(sha))
        return sorted(tips)

    # Internals --------------------------------------------------------------------------
    def _existing_refs(self, fork: str | None) -> RefsContainer:
        if fork is not None and not is_valid_repo_name(fork):
            raise RepoNotFound("Repository not found.")
        if not self.exists(fork):
            raise RepoNotFound("Repository not found.")
        return self._refs_container(fork)

    def _compare_and_set(
        self, refs: RefsContainer, ref: str, old: str | None, new: str | None
    ) -> bool:
        name = _checked_ref_name(ref)
        if new is not None:
            self.read_commit(new)  # a ref only ever names an existing commit: fail closed
        old_value = ObjectID(old.encode("ascii")) if old is not None else ZERO_SHA
        try:
            if new is None:
                return old is None or bool(refs.remove_if_equals(name, old_value))
            return bool(refs.set_if_equals(name, old_value, ObjectID(new.encode("ascii"))))
        except FileLocked:
            return False  # a concurrent writer holds the ref: this compare-and-set lost

    def _parsed[T: (Commit, Tree)](self, sha: str, type_num: int, kind: type[T]) -> T:
        with self._lock:
            if probe_object(self._objects, sha, 0).type_num != type_num:
                raise SnapshotUnavailable()
            raw = read_raw(self._objects, sha)
        try:
            return kind.from_string(raw)
        except (ObjectFormatException, ValueError) as malformed:
            raise SnapshotUnavailable() from malformed


def _checked_ref_name(ref: str) -> Ref:
    """The same rules as a push (`refnames.ref_name_problem`): git's, UTF-8, branches and tags."""
    try:
        name = Ref(ref.encode("utf-8"))
    except UnicodeEncodeError as unencodable:
        raise InvalidRefUpdate("A ref name must be UTF-8.") from unencodable
    if ref_name_problem(name) is not None:
        raise InvalidRefUpdate("Only branch and tag refs with valid names can be written.")
    return name


def is_full_sha(value: str) -> bool:
    return len(value) == 40 and valid_hexsha(value) and value == value.lower()


class ServedRepo(BaseRepo):
    """What dulwich's upload-pack and receive-pack handlers need, and nothing else.

    A push's commands are checked (`pre-receive`: ref names, how many) before its pack is
    read; its pack goes through `push_session`, which the update hook asks about each ref.
    """

    def __init__(
        self,
        objects: PackBasedObjectStore,
        refs: RefsContainer,
        max_input_bytes: int,
        push_session: PushSession | None = None,
    ) -> None:
        super().__init__(objects, refs)
        self._config = ConfigFile()
        self._config.set((b"receive",), b"maxInputSize", str(max_input_bytes).encode("ascii"))
        self.push_session = push_session or PushSession(lambda: ())
        self.hooks["pre-receive"] = _CommandCheck(self.push_session)

    def get_named_file(self, path: str | bytes, basedir: str | None = None) -> None:
        return None  # no shallow file, no description, nothing served from disk

    def get_config(self) -> ConfigFile:
        return self._config

    def get_config_stack(self) -> StackedConfig:
        return StackedConfig([self._config])

    def get_description(self) -> bytes | None:
        return None

    def close(self) -> None:
        """Close the request's view of the object store: its open packs and indexes."""
        self.object_store.close()


class _CommandCheck(Hook):
    """dulwich's pre-receive: the whole push is refused, before its pack is read, when a
    ref name breaks git's rules or it updates too many refs. dulwich sends the reason on
    git's side-band error channel, which the client prints."""

    def __init__(self, session: PushSession) -> None:
        self._session = session

    def execute(self, *args: Any) -> tuple[bytes, bytes]:
        (commands,) = args
        try:
            self._session.check_commands(commands)
        except PushRefused as refused:
            raise HookError(str(refused)) from refused
        return b"", b""
