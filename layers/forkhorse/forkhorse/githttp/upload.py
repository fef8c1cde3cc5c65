"""Upload-pack (clone and fetch) that serves only what the caller may read, within a budget.

Canonical and every fork of a project share one object store, so what a fetch may reach is
a rule here, not a property of the store:

- Every `want` must name a ref tip the requested repository advertises, or an object the
  refs the caller may read reach within a bounded walk (a partial clone's lazy fetch,
  `filters.py`); git's "not our ref" otherwise. The request is checked whole before
  anything is answered. A `filter` line is taken out of the request and applied here
  (`filters.py`), never by dulwich.
- A `have` or `shallow` line counts only when it names a commit reachable from the refs the
  caller may read (canonical and the requested repository; the owner reads everything).
  Others are dropped before negotiation, so neither an ACK nor what the pack leaves out
  tells an agent that another agent's object exists.
- Negotiation is bounded whatever history an agent pushed (`GIT_WALKS`): at most
  `negotiation_haves` haves are considered; one naming a missing object or no commit is
  dropped after one lookup; the walks that decide whether a have is visible, which commits
  the client already has, and whether its haves satisfy the wants each read at most
  `negotiation_commits` commits. What a bound leaves out only makes the pack larger (the
  byte budget below bounds that), never wrong. A round that has not said `done` gets its
  ACKs without the pack's objects being counted, as it is sent no pack.
- The pack streams one object at a time; the bytes of objects sent are counted and the
  fetch ends with git's side-band error once `clone_inflated_bytes` is spent. Stored deltas
  are reused only when a large share of the store is sent (finding them reads it all).
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import IO, Any

from dulwich.object_store import BaseObjectStore, MissingObjectFinder, PackBasedObjectStore
from dulwich.objects import Commit, ObjectID, Tag, valid_hexsha
from dulwich.pack import REF_DELTA, UnpackedObject
from dulwich.protocol import CAPABILITY_NO_DONE, pkt_line
from dulwich.refs import Ref
from dulwich.server import Backend, UploadPackHandler

from forkhorse.adapters.git.probe import probe_object
from forkhorse.domain.limits import GIT_WALKS
from forkhorse.domain.snapshot import SnapshotUnavailable
from forkhorse.githttp.filters import ObjectFilter, PackEntry, filtered
from forkhorse.githttp.shallow import (
    CAPABILITY_DEEPEN_NOT,
    CAPABILITY_DEEPEN_RELATIVE,
    CAPABILITY_DEEPEN_SINCE,
    INFINITE_DEPTH,
    ShallowSection,
)
from forkhorse.githttp.wire import Refused, RequestBody, read_pkt_lines

_COMMIT = 1
_TAG = 4
_SPOOL_BYTES = 1024 * 1024
_REUSE_SHARE = 4  # stored deltas are reused when at least a quarter of the store is sent
ALLOW_REACHABLE_SHA1_IN_WANT = b"allow-reachable-sha1-in-want"
_FIRST_SECTION = (b"want", b"shallow", b"deepen", b"filter", b"deepen-since", b"deepen-not")
_UNSUPPORTED = (b"deepen-relative",)


def not_our_ref(sha: bytes) -> Refused:
    """A want the caller may not read. Real git meets it (a ref moved between its requests),
    so it is not a malformed request: git prints the ERR line (`wire.git_error`)."""
    return Refused(404, f"upload-pack: not our ref {sha.decode('ascii', 'replace')}")


class CloneTooLarge(Refused):
    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"upload-pack: the clone or fetch would send more than {limit} bytes of objects, "
            "the server's limit; fetch less at a time (for example with --depth).",
        )


class VisibleHistory:
    """Commits and ref-tip tags reachable from the refs a caller may read, walked lazily:
    a request pays at most one walk of the visible history, however many haves it sends,
    and that walk reads at most `limit` commits; a have it has not reached by then counts
    as not visible (dropped). A have naming a missing object, a tree or a blob costs one
    lookup and no walk."""

    def __init__(
        self,
        objects: BaseObjectStore,
        tips: Iterable[bytes],
        limit: int = GIT_WALKS.negotiation_commits,
    ) -> None:
        self._objects = objects
        self._seen = {ObjectID(tip) for tip in tips}
        self._pending = list(self._seen)
        self._limit = limit
        self.walked = 0  # commits and tags read by the walk

    def __contains__(self, sha: object) -> bool:
        if not isinstance(sha, bytes) or _type_of(self._objects, sha) not in (_COMMIT, _TAG):
            return False
        while sha not in self._seen and self._pending and self.walked < self._limit:
            self._expand(self._pending.pop())
        return sha in self._seen

    def _expand(self, sha: ObjectID) -> None:
        if _type_of(self._objects, sha) not in (_COMMIT, _TAG):
            return  # a missing object hides nothing behind it; trees and blobs are not walked
        self.walked += 1
        parsed = self._objects[sha]
        followed = parsed.parents if isinstance(parsed, Commit) else []
        if isinstance(parsed, Tag):
            followed = [parsed.object[1]]
        for parent in followed:
            if parent not in self._seen:
                self._seen.add(parent)
                self._pending.append(parent)


def _type_of(objects: BaseObjectStore, sha: bytes) -> int | None:
    """The object's type from its header (one index lookup), None when it is missing."""
    try:
        return probe_object(objects, sha.decode("ascii"), 0).type_num
    except (SnapshotUnavailable, UnicodeDecodeError):
        return None


@dataclass
class RequestFacts:
    """What `checked_request` took out of a request besides the lines it kept: the `filter`
    spec, and the wants that are no advertised ref tip (allowed only when `reachable`
    says every one of them is reachable from what the caller may read)."""

    reachable: Callable[[AbstractSet[bytes]], bool] | None = None
    filter: bytes | None = None
    unadvertised: set[bytes] = field(default_factory=set)


def checked_request(
    body: RequestBody,
    advertised: AbstractSet[bytes],
    visible: VisibleHistory | None,
    facts: RequestFacts | None = None,
) -> IO[bytes]:
    """The upload-pack request, validated whole and rewritten without invisible haves.

    Spooled to disk past 1 MiB, so a large negotiation never sits in memory.
    """
    facts = facts if facts is not None else RequestFacts()
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned
    try:
        for line in _kept_lines(read_pkt_lines(body.read), advertised, visible, facts):
            spool.write(pkt_line(line))
        if facts.unadvertised:
            assert facts.reachable is not None
            if not facts.reachable(facts.unadvertised):
                raise not_our_ref(min(facts.unadvertised))
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


def _kept_lines(
    lines: Iterator[bytes | None],
    advertised: AbstractSet[bytes],
    visible: VisibleHistory | None,
    facts: RequestFacts | None = None,
) -> Iterator[bytes | None]:
    in_wants, done, seen = True, False, _Seen()
    seen.facts = facts if facts is not None else RequestFacts()
    for line in lines:
        if done:
            raise Refused(400, "upload-pack: nothing may follow 'done' or the haves' flush.")
        if line is None:
            done, in_wants = not in_wants, False  # wants, flush, haves, then flush or done
            yield None
            continue
        command, argument = _split(line)
        if command in _FIRST_SECTION if in_wants else command in (b"have", b"done"):
            done = command == b"done"
            if _kept(command, argument, advertised, visible, seen):
                yield line
            continue
        raise Refused(400, f"upload-pack: unexpected line {line[:80]!r}.")


def _split(line: bytes) -> tuple[bytes, bytes]:
    command, _, argument = line.rstrip(b"\n").partition(b" ")
    if command in _UNSUPPORTED:
        raise Refused(400, f"upload-pack: {command.decode()} is not supported by this server.")
    return command, argument


class _Seen(set[bytes]):
    """The have and shallow lines kept so far, and how many haves were considered."""

    haves = 0
    facts = RequestFacts()


def _kept(
    command: bytes,
    argument: bytes,
    advertised: AbstractSet[bytes],
    visible: VisibleHistory | None,
    seen: _Seen,
) -> bool:
    if command == b"done":
        return True
    if command == b"filter":
        seen.facts.filter = argument  # applied by BoundedUploadPack, not sent to dulwich
        return False
    if command == b"deepen":
        if not argument.isdigit() or len(argument) > 10 or not 0 < int(argument) <= INFINITE_DEPTH:
            raise Refused(400, "upload-pack: deepen needs a whole number of commits.")
        return True
    if command == b"deepen-since":
        if not argument.isdigit() or len(argument) > 12:
            raise Refused(400, "upload-pack: deepen-since needs a time in seconds.")
        return True
    if command == b"deepen-not":
        if not argument or len(argument) > 1000:
            raise Refused(400, "upload-pack: deepen-not needs a ref name.")
        return True
    sha = argument.split(b" ", 1)[0] if command == b"want" else argument  # capabilities
    if len(sha) != 40 or not valid_hexsha(sha) or sha != sha.lower():
        raise Refused(400, f"upload-pack: {command.decode()} needs an object id.")
    if command == b"want":
        if sha not in advertised:
            if seen.facts.reachable is None:
                raise not_our_ref(sha)
            seen.facts.unadvertised.add(sha)  # checked once the whole request is read
        return True
    key = command + b" " + sha
    if key in seen:
        return False
    if command == b"have":
        seen.haves += 1
        if seen.haves > GIT_WALKS.negotiation_haves:
            return False  # as git's client gives up after 256 haves in vain: a larger pack
    if visible is not None and sha not in visible:
        return False  # what the caller may not read is never acknowledged nor used
    seen.add(key)
    return True


class MeteredObjects:
    """The object store as the pack writer sees it: every object taken is charged first."""

    def __init__(self, inner: PackBasedObjectStore, limit: int) -> None:
        self._inner = inner
        self._limit = limit
        self._sent = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __contains__(self, sha: object) -> bool:
        return isinstance(sha, bytes) and ObjectID(sha) in self._inner

    def __getitem__(self, sha: ObjectID) -> Any:
        try:
            size = probe_object(self._inner, sha.decode("ascii"), 0).size
        except SnapshotUnavailable as missing:
            raise KeyError(sha) from missing
        self._charge(size)  # before the object is inflated
        return self._inner[sha]

    def iter_unpacked_subset(
        self, shas: Iterable[ObjectID], *args: Any, **kwargs: Any
    ) -> Iterator[UnpackedObject]:
        """Deltas reused as they are stored; each is charged the bytes it inflates to.

        Finding them inflates every object stored (dulwich scans each pack whole), so they
        are reused only when what is sent is at least 1/`_REUSE_SHARE` of what is stored:
        a small fetch from a project holding much sends whole objects instead, and its cost
        follows what it sends, not what agents pushed."""
        wanted = set(shas)
        if len(wanted) * _REUSE_SHARE < self._stored():
            return
        for unpacked in self._inner.iter_unpacked_subset(wanted, *args, **kwargs):
            if unpacked.pack_type_num == REF_DELTA:
                self._charge(sum(len(chunk) for chunk in unpacked.decomp_chunks or ()))
            yield unpacked

    def _stored(self) -> int:
        return sum(len(pack) for pack in self._inner.packs)

    def _charge(self, size: int) -> None:
        self._sent += size
        if self._sent > self._limit:
            raise CloneTooLarge(self._limit)


class BoundedUploadPack(UploadPackHandler):
    """dulwich's upload-pack with the pack metered as it is written, and partial clones
    served by `filters.py` (dulwich's own filters never run: a `sparse:oid` filter reads
    any blob by id). `object_filter` and `unadvertised` wants come from `checked_request`."""

    def __init__(
        self,
        backend: Backend,
        args: Any,
        proto: Any,
        *,
        send_limit: int,
        walk_limit: int = GIT_WALKS.negotiation_commits,
        object_filter: ObjectFilter | None = None,
        unadvertised: AbstractSet[bytes] = frozenset(),
        **kw: Any,
    ) -> None:
        super().__init__(backend, args, proto, **kw)
        self._send_limit = send_limit
        self._walk_limit = walk_limit
        self._object_filter = object_filter
        self._unadvertised: dict[Ref, ObjectID] = {
            Ref(b"refs/forkhorse/want/" + sha): ObjectID(sha) for sha in unadvertised
        }

    def capabilities(self) -> list[bytes]:
        return [
            *super().capabilities(),
            CAPABILITY_DEEPEN_SINCE,
            CAPABILITY_DEEPEN_NOT,
            CAPABILITY_DEEPEN_RELATIVE,
            ALLOW_REACHABLE_SHA1_IN_WANT,
        ]

    def set_client_capabilities(self, caps: Iterable[bytes]) -> None:
        super().set_client_capabilities(caps)
        self.filter_spec = None  # a `filter=<spec>` capability is not git's; never dulwich's

    def handle(self) -> None:
        """dulwich's upload-pack over `NegotiationObjects` until the pack is sent."""
        objects = self.repo.object_store
        self._objects = objects
        negotiating = NegotiationObjects(objects, self._walk_limit, self._no_pack_this_round)
        self.repo.object_store = negotiating  # type: ignore[misc, assignment]
        find = self.repo.find_missing_objects

        def find_missing(determine_wants: Any, graph_walker: Any, *args: Any, **kw: Any) -> Any:
            relative = lambda: self.has_capability(CAPABILITY_DEEPEN_RELATIVE)  # noqa: E731
            ShallowSection(graph_walker, relative=relative, refs=self.repo.get_refs).install()
            satisfied = graph_walker.all_wants_satisfied
            graph_walker.all_wants_satisfied = _bounded(graph_walker, satisfied, self._walk_limit)

            def determine(refs: Mapping[Ref, ObjectID], depth: int | None = None) -> Any:
                wanted: dict[Ref, ObjectID] = {**refs, **self._unadvertised}
                return determine_wants(wanted, depth)

            try:
                found = find(determine, graph_walker, *args, **kw)
            except _NoPackThisRound:
                return MissingObjectFinder(objects, haves=[], wants=[])
            if found is None or self._object_filter is None:
                return found
            entries: list[PackEntry] = list(found)
            return filtered(objects, entries, self._object_filter)

        self.repo.find_missing_objects = find_missing  # type: ignore[method-assign]
        super().handle()

    def _no_pack_this_round(self) -> bool:
        """No pack this round: a stateless request that has not said `done` (and did not
        ask for `no-done`) is answered with ACKs or NAK only (dulwich's `handle_done`)."""
        return (
            self.stateless_rpc
            and not self._done_received
            and not self.has_capability(CAPABILITY_NO_DONE)
        )

    def _start_pack_send_phase(self) -> None:
        super()._start_pack_send_phase()
        inner = getattr(self, "_objects", self.repo.object_store)
        metered = MeteredObjects(inner, self._send_limit)
        self.repo.object_store = metered  # type: ignore[misc, assignment]


class _NoPackThisRound(Exception):
    """The round's ACKs are written; it sends no pack, so nothing is counted for one."""


class _WalkSpent(Exception):
    pass


class NegotiationObjects:
    """The object store as dulwich's negotiation sees it: the commits a client already has
    are walked from its haves for at most `limit` commits (breadth first, so the haves
    themselves and their nearest history come first), and a round that sends no pack
    stops once its ACKs are written."""

    def __init__(
        self, inner: PackBasedObjectStore, limit: int, no_pack: Callable[[], bool]
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._no_pack = no_pack

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __contains__(self, sha: object) -> bool:
        return isinstance(sha, bytes) and ObjectID(sha) in self._inner

    def __getitem__(self, sha: ObjectID) -> Any:
        return self._inner[sha]

    def find_common_revisions(self, graph_walker: Any) -> list[ObjectID]:
        haves = self._inner.find_common_revisions(graph_walker)
        if self._no_pack():
            raise _NoPackThisRound()
        return haves

    def get_reachability_provider(self, prefer_bitmaps: bool = True) -> Any:
        return _BoundedReach(self._inner, self._limit)


class _BoundedReach:
    """dulwich's reachability, except that "everything the haves reach" stops after
    `limit` commits: the part left out is sent again, which the byte budget bounds."""

    def __init__(self, objects: PackBasedObjectStore, limit: int) -> None:
        self._objects = objects
        self._inner = objects.get_reachability_provider()
        self._limit = limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_reachable_commits(
        self,
        heads: Iterable[ObjectID],
        exclude: Iterable[ObjectID] | None = None,
        shallow: AbstractSet[ObjectID] | None = None,
    ) -> set[ObjectID]:
        if exclude is not None:
            return set(self._inner.get_reachable_commits(heads, exclude, shallow))
        reached: set[ObjectID] = set()
        pending = deque(heads)
        while pending and len(reached) < self._limit:
            sha = pending.popleft()
            if sha in reached:
                continue
            reached.add(sha)
            if shallow is not None and sha in shallow:
                continue
            try:
                commit = self._objects[sha]
            except KeyError:
                continue
            if isinstance(commit, Commit):
                pending.extend(commit.parents)
        return reached


class _CountedObjects:
    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._left = limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __contains__(self, sha: object) -> bool:
        return sha in self._inner

    def __getitem__(self, sha: ObjectID) -> Any:
        self._left -= 1
        if self._left < 0:
            raise _WalkSpent()
        return self._inner[sha]


def _bounded(
    graph_walker: Any, satisfied: Callable[[AbstractSet[ObjectID]], bool], limit: int
) -> Callable[[AbstractSet[ObjectID]], bool]:
    """dulwich's "do the haves satisfy every want" (asked at each round's flush) walks from
    each want down to the oldest have's date; past `limit` commits the answer is "not yet",
    which only withholds the `ready` ACK."""

    def bounded(haves: AbstractSet[ObjectID]) -> bool:
        store = graph_walker.store
        graph_walker.store = _CountedObjects(store, limit)
        try:
            return satisfied(haves)
        except _WalkSpent:
            return False
        finally:
            graph_walker.store = store

    return bounded
