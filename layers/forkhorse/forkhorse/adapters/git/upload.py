"""Upload-pack (clone and fetch) that serves only what the caller may read, within a budget.

Canonical and every fork of a project share one object store, so what a fetch may reach is
a rule here, not a property of the store:

- Every `want` must name a ref tip the requested repository advertises (git's "not our
  ref" otherwise), and the request is checked whole before anything is answered.
- A `have` or `shallow` line counts only when it names a commit reachable from the refs the
  caller may read (canonical and the requested repository; the owner reads everything).
  Others are dropped before negotiation, so neither an ACK nor what the pack leaves out
  tells an agent that another agent's object exists.
- The pack streams one object at a time; the bytes of objects sent are counted and the
  fetch ends with git's side-band error once `clone_inflated_bytes` is spent.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import IO, Any

from dulwich.object_store import BaseObjectStore, PackBasedObjectStore
from dulwich.objects import Commit, ObjectID, Tag, valid_hexsha
from dulwich.pack import REF_DELTA, UnpackedObject
from dulwich.protocol import CAPABILITY_FILTER, pkt_line
from dulwich.server import Backend, UploadPackHandler

from forkhorse.adapters.git.probe import probe_object
from forkhorse.adapters.git.wire import Refused, RequestBody, read_pkt_lines
from forkhorse.domain.snapshot import SnapshotUnavailable

_COMMIT = 1
_TAG = 4
_SPOOL_BYTES = 1024 * 1024
_FIRST_SECTION = (b"want", b"shallow", b"deepen")
_UNSUPPORTED = (b"deepen-since", b"deepen-not", b"deepen-relative", b"filter")


def not_our_ref(sha: bytes) -> Refused:
    return Refused(400, f"upload-pack: not our ref {sha.decode('ascii', 'replace')}")


class CloneTooLarge(Refused):
    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"upload-pack: the clone or fetch would send more than {limit} bytes of objects, "
            "the server's limit; fetch less at a time (for example with --depth).",
        )


class VisibleHistory:
    """Commits and ref-tip tags reachable from the refs a caller may read, walked lazily:
    a request pays at most one walk of the visible history, however many haves it sends."""

    def __init__(self, objects: BaseObjectStore, tips: Iterable[bytes]) -> None:
        self._objects = objects
        self._seen = {ObjectID(tip) for tip in tips}
        self._pending = list(self._seen)

    def __contains__(self, sha: object) -> bool:
        if not isinstance(sha, bytes) or ObjectID(sha) not in self._objects:
            return False
        while sha not in self._seen and self._pending:
            self._expand(self._pending.pop())
        return sha in self._seen

    def _expand(self, sha: ObjectID) -> None:
        try:
            type_num = probe_object(self._objects, sha.decode("ascii"), 0).type_num
        except SnapshotUnavailable:
            return  # a missing object hides nothing behind it
        if type_num not in (_COMMIT, _TAG):
            return  # trees and blobs are never haves: only commits are walked
        parsed = self._objects[sha]
        followed = parsed.parents if isinstance(parsed, Commit) else []
        if isinstance(parsed, Tag):
            followed = [parsed.object[1]]
        for parent in followed:
            if parent not in self._seen:
                self._seen.add(parent)
                self._pending.append(parent)


def checked_request(
    body: RequestBody, advertised: AbstractSet[bytes], visible: VisibleHistory | None
) -> IO[bytes]:
    """The upload-pack request, validated whole and rewritten without invisible haves.

    Spooled to disk past 1 MiB, so a large negotiation never sits in memory.
    """
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned
    try:
        for line in _kept_lines(read_pkt_lines(body.read), advertised, visible):
            spool.write(pkt_line(line))
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


def _kept_lines(
    lines: Iterator[bytes | None], advertised: AbstractSet[bytes], visible: VisibleHistory | None
) -> Iterator[bytes | None]:
    in_wants, done, seen = True, False, set[bytes]()
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


def _kept(
    command: bytes,
    argument: bytes,
    advertised: AbstractSet[bytes],
    visible: VisibleHistory | None,
    seen: set[bytes],
) -> bool:
    if command == b"done":
        return True
    if command == b"deepen":
        if not argument.isdigit() or len(argument) > 9:
            raise Refused(400, "upload-pack: deepen needs a whole number of commits.")
        return True
    sha = argument.split(b" ", 1)[0] if command == b"want" else argument  # capabilities
    if len(sha) != 40 or not valid_hexsha(sha) or sha != sha.lower():
        raise Refused(400, f"upload-pack: {command.decode()} needs an object id.")
    if command == b"want":
        if sha not in advertised:
            raise not_our_ref(sha)
        return True
    key = command + b" " + sha
    if key in seen or (visible is not None and sha not in visible):
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

    def iter_unpacked_subset(self, *args: Any, **kwargs: Any) -> Iterator[UnpackedObject]:
        """Deltas reused as they are stored; each is charged the bytes it inflates to."""
        for unpacked in self._inner.iter_unpacked_subset(*args, **kwargs):
            if unpacked.pack_type_num == REF_DELTA:
                self._charge(sum(len(chunk) for chunk in unpacked.decomp_chunks or ()))
            yield unpacked

    def _charge(self, size: int) -> None:
        self._sent += size
        if self._sent > self._limit:
            raise CloneTooLarge(self._limit)


class BoundedUploadPack(UploadPackHandler):
    """dulwich's upload-pack without partial-clone filters (a `sparse:oid` filter reads any
    blob by id) and with the pack metered as it is written."""

    def __init__(
        self, backend: Backend, args: Any, proto: Any, *, send_limit: int, **kw: Any
    ) -> None:
        super().__init__(backend, args, proto, **kw)
        self._send_limit = send_limit

    def capabilities(self) -> list[bytes]:
        return [cap for cap in super().capabilities() if cap != CAPABILITY_FILTER]

    def _start_pack_send_phase(self) -> None:
        super()._start_pack_send_phase()
        metered = MeteredObjects(self.repo.object_store, self._send_limit)
        self.repo.object_store = metered  # type: ignore[misc, assignment]
