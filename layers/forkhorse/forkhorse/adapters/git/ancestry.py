"""Ancestry by generation numbers, remembered per project, so its cost does not grow with
what an agent pushed (issue 28).

A commit's generation is 1 + the largest generation of its parents (a root's is 1), so an
ancestor's is always smaller than its descendant's. Each commit is read once, when a
question first reaches it; its generation and parents are then remembered (`AncestryMemo`),
and so is each answer for an (ancestor, descendant) pair. So:

- a repeated question (the console polling the gate, promote rechecking it) is one lookup
  and reads no commit;
- a question about a new commit on top of an answered one reads the new commit and stops
  at the remembered answer below it;
- the first question after a push reads that push's commits once; the walk that answers it
  goes only through remembered commits whose generation is above the ancestor's.

One question reads at most `GIT_WALKS.history_commits` new commits; past that it keeps what
it learned and raises `HistoryTooLong`, so asking again goes on where it stopped. Its walk
between the two takes at most `GIT_WALKS.history_steps` steps over remembered commits;
past that the answer is `HistoryTooLong` for good (the commit is too far above canonical).
Generations and parents are facts of content-addressed commits, so a remembered row is
never wrong, only possibly unused (a collected commit's row stays).

Locally the memo is a SQLite file in the home (`SqliteAncestryMemo`); on AWS it is the
Lambda container's memory (`MemoryAncestryMemo`, least recently used rows dropped past a
bound), which keeps answers correct and makes a warm container's repeated questions cheap.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from forkhorse.domain.limits import GIT_WALKS
from forkhorse.domain.snapshot import SnapshotUnavailable
from forkhorse.ports.ancestry import HistoryTooLong
from forkhorse.ports.git import GitStore

Node = tuple[int, tuple[str, ...]]  # generation, parents


class MemoSession(Protocol):
    """One question's view of one project's memo."""

    def node(self, sha: str) -> Node | None: ...

    def answer(self, ancestor: str, descendant: str) -> bool | None: ...

    def remember(self, nodes: Mapping[str, Node], answers: Mapping[tuple[str, str], bool]) -> None:
        """Keep what one question learned (also when it stopped at its bound)."""
        ...


class AncestryMemo(Protocol):
    def session(self, project: str) -> AbstractContextManager[MemoSession]: ...


class GenerationAncestry:
    """`CommitAncestry` over a memo of generations, parents and answers."""

    def __init__(
        self,
        memo: AncestryMemo,
        limit: int = GIT_WALKS.history_commits,
        steps: int = GIT_WALKS.history_steps,
    ) -> None:
        self._memo = memo
        self._limit = limit
        self._steps = steps

    def is_ancestor(self, repos: GitStore, ancestor: str, descendant: str) -> bool:
        if not (_is_sha(ancestor) and _is_sha(descendant)):
            raise SnapshotUnavailable()
        with self._memo.session(repos.project) as memo:
            question = _Question(repos, memo, self._limit, self._steps)
            try:
                return question.is_ancestor(ancestor, descendant)
            finally:
                memo.remember(question.nodes, question.answers)


def _is_sha(value: str) -> bool:
    return len(value) == 40 and all(char in "0123456789abcdef" for char in value)


class _Question:
    def __init__(self, repos: GitStore, memo: MemoSession, limit: int, steps: int) -> None:
        self._repos = repos
        self._memo = memo
        self._limit = limit
        self._step_limit = steps
        self._spent = 0  # commits read
        self._steps = 0  # remembered commits walked
        self.nodes: dict[str, Node] = {}  # learned by this question, remembered at its end
        self._unknown: set[str] = set()  # not in the memo when this question asked
        self.answers: dict[tuple[str, str], bool] = {}

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            self._generation(ancestor)  # a commit, or SnapshotUnavailable
            return True
        known = self._memo.answer(ancestor, descendant)
        if known is not None:
            return known
        floor = self._generation(ancestor)
        top = self._generation(descendant)
        answer = top > floor and self._reaches(ancestor, floor, descendant)
        self.answers[(ancestor, descendant)] = answer
        return answer

    def _reaches(self, ancestor: str, floor: int, descendant: str) -> bool:
        """Walk down from `descendant` through commits above the ancestor's generation only
        (no other can have it as an ancestor), stopping at a remembered answer."""
        seen = {descendant}
        pending = [descendant]
        while pending:
            sha = pending.pop()
            if sha == ancestor:
                return True
            if sha != descendant and sha not in self._unknown:  # new commits have no answers
                known = self._memo.answer(ancestor, sha)
                if known is not None:
                    if known:
                        return True
                    continue
            self._step()
            for parent in self._node(sha)[1]:
                if parent not in seen and (parent == ancestor or self._node(parent)[0] > floor):
                    seen.add(parent)
                    pending.append(parent)
        return False

    def _node(self, sha: str) -> Node:
        node = self._known(sha)
        if node is None or node[0] == 0:
            self._generation(sha)
            node = self.nodes[sha]
        return node

    def _known(self, sha: str) -> Node | None:
        """What is remembered of a commit; a generation of 0 means only its parents are
        (a question that stopped at its bound read it). The memo is asked once per commit."""
        node = self.nodes.get(sha)
        if node is not None or sha in self._unknown:
            return node
        node = self._memo.node(sha)
        if node is None:
            self._unknown.add(sha)
        return node

    def _generation(self, sha: str) -> int:
        """The commit's generation, reading each commit not yet remembered once."""
        known = self._known(sha)
        if known is not None and known[0] > 0:
            return known[0]
        read: dict[str, tuple[str, ...]] = {}
        pending = [sha]
        try:
            while pending:
                current = pending[-1]
                node = self._known(current)
                if node is not None and node[0] > 0:
                    pending.pop()
                    continue
                parents = read.get(current)
                if parents is None:
                    parents = node[1] if node is not None else self._read(current)
                    read[current] = parents
                generations = [self._known(parent) for parent in parents]
                missing = [
                    parent
                    for parent, generation in zip(parents, generations, strict=True)
                    if generation is None or generation[0] == 0
                ]
                if missing:
                    pending.extend(missing)
                    continue
                top = max((node[0] for node in generations if node is not None), default=0)
                self.nodes[current] = (top + 1, parents)
                del read[current]
                pending.pop()
        except HistoryTooLong:
            for current, parents in read.items():  # kept: the next question reads on
                self.nodes.setdefault(current, (0, parents))
            raise
        return self.nodes[sha][0]

    def _read(self, sha: str) -> tuple[str, ...]:
        self._spend()
        return self._repos.read_commit(sha).parents

    def _spend(self) -> None:
        self._spent += 1
        if self._spent > self._limit:
            raise HistoryTooLong(f"more than {self._limit} commits not read before")

    def _step(self) -> None:
        self._steps += 1
        if self._steps > self._step_limit:
            raise HistoryTooLong(f"more than {self._step_limit} commits between the two")


# --- memos ---------------------------------------------------------------------------------
class MemoryAncestryMemo:
    """Process memory, at most `limit` commits and as many answers (least recently used
    dropped first); shared by every thread of the process."""

    def __init__(self, limit: int = GIT_WALKS.memo_commits) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._nodes: OrderedDict[tuple[str, str], Node] = OrderedDict()
        self._answers: OrderedDict[tuple[str, str, str], bool] = OrderedDict()

    @contextmanager
    def session(self, project: str) -> Iterator[MemoSession]:
        yield _MemorySession(self, project)

    def _get_node(self, project: str, sha: str) -> Node | None:
        with self._lock:
            node = self._nodes.get((project, sha))
            if node is not None:
                self._nodes.move_to_end((project, sha))
            return node

    def _get_answer(self, project: str, ancestor: str, descendant: str) -> bool | None:
        with self._lock:
            key = (project, ancestor, descendant)
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
            return answer

    def _put(
        self,
        project: str,
        nodes: Mapping[str, Node],
        answers: Mapping[tuple[str, str], bool],
    ) -> None:
        with self._lock:
            for sha, node in nodes.items():
                held = self._nodes.get((project, sha))
                if held is None or node[0] > held[0]:
                    self._nodes[(project, sha)] = node
            for (ancestor, descendant), answer in answers.items():
                self._answers[(project, ancestor, descendant)] = answer
            while len(self._nodes) > self._limit:
                self._nodes.popitem(last=False)
            while len(self._answers) > self._limit:
                self._answers.popitem(last=False)


class _MemorySession:
    def __init__(self, memo: MemoryAncestryMemo, project: str) -> None:
        self._memo = memo
        self._project = project

    def node(self, sha: str) -> Node | None:
        return self._memo._get_node(self._project, sha)

    def answer(self, ancestor: str, descendant: str) -> bool | None:
        return self._memo._get_answer(self._project, ancestor, descendant)

    def remember(self, nodes: Mapping[str, Node], answers: Mapping[tuple[str, str], bool]) -> None:
        self._memo._put(self._project, nodes, answers)


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS commits (project TEXT NOT NULL, sha BLOB NOT NULL,"
    " generation INTEGER NOT NULL, parents BLOB NOT NULL, PRIMARY KEY (project, sha))"
    " WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS answers (project TEXT NOT NULL, ancestor BLOB NOT NULL,"
    " descendant BLOB NOT NULL, answer INTEGER NOT NULL,"
    " PRIMARY KEY (project, ancestor, descendant)) WITHOUT ROWID",
)


class SqliteAncestryMemo:
    """A SQLite file (mode 0600) that outlives restarts: a commit is read once per project
    for the life of the home. Ids are stored as 20 bytes, parents concatenated, so a
    commit's row is about 60 bytes. Each question opens its own connection."""

    def __init__(self, path: Path) -> None:
        self._path = path
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(descriptor)
        path.chmod(0o600)
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                connection.execute(statement)
        connection.close()

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=30.0, isolation_level=None)

    @contextmanager
    def session(self, project: str) -> Iterator[MemoSession]:
        connection = self._connect()
        try:
            yield _SqliteSession(connection, project)
        finally:
            connection.close()


class _SqliteSession:
    def __init__(self, connection: sqlite3.Connection, project: str) -> None:
        self._db = connection
        self._project = project

    def node(self, sha: str) -> Node | None:
        row = self._db.execute(
            "SELECT generation, parents FROM commits WHERE project = ? AND sha = ?",
            (self._project, bytes.fromhex(sha)),
        ).fetchone()
        if row is None:
            return None
        parents: bytes = row[1]
        return int(row[0]), tuple(parents[i : i + 20].hex() for i in range(0, len(parents), 20))

    def answer(self, ancestor: str, descendant: str) -> bool | None:
        row = self._db.execute(
            "SELECT answer FROM answers WHERE project = ? AND ancestor = ? AND descendant = ?",
            (self._project, bytes.fromhex(ancestor), bytes.fromhex(descendant)),
        ).fetchone()
        return None if row is None else bool(row[0])

    def remember(self, nodes: Mapping[str, Node], answers: Mapping[tuple[str, str], bool]) -> None:
        if not nodes and not answers:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT INTO commits VALUES (?, ?, ?, ?) ON CONFLICT (project, sha)"
                " DO UPDATE SET generation = excluded.generation"
                " WHERE excluded.generation > commits.generation",
                (
                    (
                        self._project,
                        bytes.fromhex(sha),
                        generation,
                        b"".join(bytes.fromhex(parent) for parent in parents),
                    )
                    for sha, (generation, parents) in nodes.items()
                ),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)",
                (
                    (self._project, bytes.fromhex(a), bytes.fromhex(d), int(answer))
                    for (a, d), answer in answers.items()
                ),
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
