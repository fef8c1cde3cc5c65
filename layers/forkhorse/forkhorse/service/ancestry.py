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
never wrong, only possibly unused; a memo bounds its rows and may forget any of them.

The memo is a port (`AncestryMemo`): locally a SQLite file in the home
(`adapters/git/ancestry.py`); on AWS, and wherever none is given, the process's memory
(`MemoryAncestryMemo`, least recently used rows dropped past a bound), which keeps answers
correct and makes a warm container's repeated questions cheap.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from forkhorse.domain.limits import GIT_WALKS
from forkhorse.domain.snapshot import SnapshotUnavailable
from forkhorse.ports.ancestry import AncestryMemo, HistoryTooLong, MemoSession, Node
from forkhorse.ports.git import GitStore


class GenerationAncestry:
    """`CommitAncestry` over a memo of generations, parents and answers."""

    def __init__(
        self,
        memo: AncestryMemo | None = None,
        limit: int = GIT_WALKS.history_commits,
        steps: int = GIT_WALKS.history_steps,
    ) -> None:
        self._memo = memo or MemoryAncestryMemo()
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
                if not question.truncated:  # generations past a missing parent are not facts
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
        self._asked: set[str] = set()  # the question's own commits: these must exist
        self.truncated = False  # a parent was missing (a shallow import's boundary)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        self._asked = {ancestor, descendant}
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
        """A commit's parents; a missing parent ends the history there, as git's shallow
        boundary does (nothing past it can be an ancestor we could read)."""
        self._spend()
        try:
            return self._repos.read_commit(sha).parents
        except SnapshotUnavailable:
            if sha in self._asked:
                raise
            self.truncated = True
            return ()

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
