"""Shallow fetches: `deepen`, `deepen-relative`, `deepen-since`, `deepen-not`, `--unshallow`.

dulwich's upload-pack understands `shallow` lines and `deepen <n>` only, and walks the
whole history for a deep request. Here the request's shallow section (after its wants) is
read by `ShallowSection`, which replaces the graph walker's `_handle_shallow_request`:

- `shallow <sha>`: a commit at the client's boundary (already checked visible by
  `upload.checked_request`, which drops the others).
- `deepen <n>`: at most `n` commits from each want (git's `--depth`; `--unshallow` sends
  2147483647). With the client's `deepen-relative` capability (`--deepen=<n>`), `n` more
  commits below each of the client's shallow commits.
- `deepen-since <time>`: the commits reachable from the wants that are not older than
  `<time>` (`--shallow-since`); a commit with an older parent becomes a boundary.
- `deepen-not <ref>` (`--shallow-exclude`): the commits reachable from the wants and not from
  `<ref>` (a ref the requested repository advertises, named whole or as `refs/heads/<ref>`
  or `refs/tags/<ref>`; git's "ambiguous deepen-not" otherwise); a commit with an excluded
  parent becomes a boundary. The excluded history is walked within the same budget: past
  it, what is not yet known to be excluded is sent (a deeper answer, still bounded).
- No deepen line (a plain fetch from a shallow clone): the boundary is left as it is and
  no shallow information is sent, as git's own server does.

The boundary walk reads at most `GIT_SHALLOW.deepen_commits` commits, breadth first; the
commits it reached but did not read become the boundary, so a very deep request gets a
shallower history (fetching again goes deeper), never an unbounded walk.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from dulwich.objects import Commit, ObjectID, Tag
from dulwich.protocol import COMMAND_DEEPEN
from dulwich.server import _split_proto_line

from forkhorse.domain.limits import GIT_SHALLOW
from forkhorse.githttp.wire import Refused

CAPABILITY_DEEPEN_SINCE = b"deepen-since"
CAPABILITY_DEEPEN_RELATIVE = b"deepen-relative"
CAPABILITY_DEEPEN_NOT = b"deepen-not"
INFINITE_DEPTH = 0x7FFFFFFF  # what `git fetch --unshallow` asks for
_MARKER = b"deepen 0"  # never sent by git (depths start at 1): a line was set aside


class ShallowSection:
    """Installed on one request's graph walker: reads the shallow section and answers it.
    `relative` tells, once the client's capabilities are read, whether it asked for
    `deepen-relative`."""

    def __init__(
        self,
        walker: Any,
        *,
        relative: Callable[[], bool],
        refs: Callable[[], Mapping[Any, bytes]] = dict,
        limit: int = GIT_SHALLOW.deepen_commits,
    ) -> None:
        self._walker = walker
        self._relative = relative
        self._refs = refs
        self._limit = limit
        self._set_aside: list[bytes] = []
        self.read_commits = 0

    def install(self) -> None:
        self._walker.read_proto_line = self._read_proto_line
        self._walker._handle_shallow_request = self._handle

    def _read_proto_line(self, allowed: Iterable[bytes | None] | None) -> Any:
        """dulwich's line reader, except that a `deepen-since` or `deepen-not` line right
        after the wants starts the shallow section (dulwich's `determine_wants` knows only
        `shallow` and `deepen` there)."""
        line = self._walker.proto.read_pkt_line()
        if line is not None and line.startswith((b"deepen-since ", b"deepen-not ")):
            self._set_aside.append(line)
            return COMMAND_DEEPEN, 0  # dulwich puts back `deepen 0`, read by `_handle`
        return _split_proto_line(line, allowed)

    def _handle(self, wants: Sequence[ObjectID]) -> None:
        walker = self._walker
        client_shallow: set[ObjectID] = set()
        depth: int | None = None
        since: int | None = None
        excluded: list[ObjectID] = []
        while (line := walker.proto.read_pkt_line()) is not None:
            if line.rstrip(b"\n") == _MARKER and self._set_aside:
                line = self._set_aside.pop()
            command, _, argument = line.rstrip(b"\n").partition(b" ")
            if command == b"shallow":
                client_shallow.add(ObjectID(argument))
            elif command == b"deepen":
                depth = int(argument)
            elif command == b"deepen-since":
                since = int(argument)
            elif command == b"deepen-not":
                excluded.append(self._ref_tip(argument))
        walker.client_shallow.update(client_shallow)
        if depth is None and since is None and not excluded:
            return  # a plain fetch from a shallow clone: nothing to deepen, nothing sent
        if depth is not None and (since is not None or excluded):
            raise Refused(
                400, "upload-pack: deepen and deepen-since (or deepen-not) cannot be used together"
            )
        if depth is not None and self._relative():
            starts: Sequence[ObjectID] = sorted(client_shallow)
            depth = min(depth, INFINITE_DEPTH - 1) + 1
        else:
            starts = wants
        hidden = self.reachable(walker.store, excluded) if excluded else frozenset()
        shallow, deep = self.boundary(walker.store, starts, depth=depth, since=since, hidden=hidden)
        walker.shallow.update(shallow - deep)
        new_shallow = walker.shallow - walker.client_shallow
        unshallow = walker.unshallow = deep & walker.client_shallow
        walker.update_shallow(new_shallow, unshallow)

    def boundary(
        self,
        objects: Any,
        starts: Iterable[ObjectID],
        *,
        depth: int | None,
        since: int | None,
        hidden: AbstractSet[ObjectID] = frozenset(),
    ) -> tuple[set[ObjectID], set[ObjectID]]:
        """(boundary, kept): `kept` commits keep their parents; `boundary` ones are sent
        without them. Breadth first from `starts` (each at depth 1); a parent that is
        `hidden` or older than `since` makes its child a boundary."""
        level: dict[ObjectID, int] = {}
        queue: deque[ObjectID] = deque()
        for start in starts:
            sha = self._peeled(objects, start)
            if sha is not None and sha not in level:
                level[sha] = 1
                queue.append(sha)
        shallow: set[ObjectID] = set()
        deep: set[ObjectID] = set()
        read: dict[ObjectID, Commit | None] = {}  # parents read for their dates, not yet walked
        while queue:
            sha = queue.popleft()
            if depth is not None and level[sha] >= depth:
                shallow.add(sha)
                continue
            commit = read.pop(sha) if sha in read else self._commit(objects, sha)
            if commit is None:  # the walk's budget is spent (or the commit is missing)
                shallow.add(sha)
                continue
            parents = list(commit.parents)
            if any(parent in hidden for parent in parents):
                shallow.add(sha)
                continue
            if since is not None:
                dated = {
                    parent: read.get(parent) or self._commit(objects, parent) for parent in parents
                }
                if any(parent is None or parent.commit_time < since for parent in dated.values()):
                    shallow.add(sha)
                    continue
                read.update(dated)
            deep.add(sha)
            for parent in parents:
                if parent not in level:
                    level[parent] = level[sha] + 1
                    queue.append(parent)
        return shallow, deep

    def reachable(self, objects: Any, tips: Iterable[ObjectID]) -> set[ObjectID]:
        """The commits `tips` reach, breadth first, within what is left of the budget."""
        seen: set[ObjectID] = set()
        queue: deque[ObjectID] = deque()
        for tip in tips:
            sha = self._peeled(objects, tip)
            if sha is not None and sha not in seen:
                seen.add(sha)
                queue.append(sha)
        while queue:
            commit = self._commit(objects, queue.popleft())
            if commit is None:
                continue
            for parent in commit.parents:
                if parent not in seen:
                    seen.add(parent)
                    queue.append(parent)
        return seen

    def _ref_tip(self, name: bytes) -> ObjectID:
        refs = self._refs()
        found = {
            refs[full]
            for full in (name, b"refs/" + name, b"refs/heads/" + name, b"refs/tags/" + name)
            if full in refs
        }
        if len(found) != 1:
            shown = name.decode("utf-8", "replace")
            raise Refused(404, f"upload-pack: ambiguous deepen-not: {shown}")
        return ObjectID(found.pop())

    def _commit(self, objects: Any, sha: ObjectID) -> Commit | None:
        if self.read_commits >= self._limit:
            return None
        self.read_commits += 1
        try:
            parsed = objects[sha]
        except KeyError:
            return None
        return parsed if isinstance(parsed, Commit) else None

    def _peeled(self, objects: Any, sha: ObjectID) -> ObjectID | None:
        for _ in range(16):
            try:
                parsed = objects[sha]
            except KeyError:
                return None
            if not isinstance(parsed, Tag):
                return sha if isinstance(parsed, Commit) else None
            sha = parsed.object[1]
        return None
