"""Issue 28, what git can still make Forkhorse spend: history walks and negotiation walks.

An agent pushes a long history cheaply (tens of thousands of empty commits, made with
`git fast-import` and pushed with the real git CLI) and then:

- has the owner's console poll the gate, which asks whether canonical's head is an
  ancestor of the reviewed commit: only the first question reads the pushed history, each
  commit once; the next polls read no commit at all (`service/ancestry.py`);
- sends 150-byte fetches whose `have` lines name objects that are missing, are not
  commits, or sit deep in that history, and negotiation rounds without `done`: each reads at
  most `GIT_WALKS.negotiation_commits` commits, whatever was pushed (`githttp/upload.py`);
- runs many expensive fetches at once: an API request for another project is answered
  while they run, because git requests have slots of their own (`GIT_CONCURRENCY`), fewer
  than the server's threads.

Work is counted, not timed: commits parsed in this process (the server runs in it, on
loopback, with the same waitress thread count as `forkhorse serve`). The one race (API
request against running fetches) compares the order of events, with attackers bounded in
number and every wait bounded in time.
"""

from __future__ import annotations

import base64
import http.client
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from dulwich.objects import Commit
from dulwich.pack import PackData
from forkhorse.adapters.git.ancestry import SqliteAncestryMemo
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.git.store import DulwichGitStore
from forkhorse.domain.limits import GIT_CONCURRENCY, GIT_WALKS
from forkhorse.githttp import http as git_http
from forkhorse.ports.ancestry import HistoryTooLong
from forkhorse.serve import THREADS
from forkhorse.service.ancestry import GenerationAncestry, MemoryAncestryMemo

from tests.support.gitserve import commit_all, git, import_objects, new_repo
from tests.support.live import Project, Server, new_lane, new_project

LONG = 24_000  # commits an agent pushes: more than any walk bound below
CAPS = "multi_ack_detailed side-band-64k thin-pack ofs-delta"
SMALL = 16  # commits a question may read when nothing new was pushed
DEEP = 4_000  # commits of the long fork each fetch of the concurrency attack clones


# --- helpers ------------------------------------------------------------------------------
def fast_import(repo: Path, count: int, message: str = "step") -> str:
    """`count` empty commits on top of `repo`'s main, made by git fast-import (seconds, not
    minutes); returns the new head."""
    parent = subprocess.run(
        ["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    stream = bytearray()
    for index in range(count):
        data = f"{message} {index}\n".encode()
        stream += b"commit refs/heads/main\n"
        stream += b"committer Agent <agent@forkhorse.invalid> 1790000000 +0000\n"
        stream += f"data {len(data)}\n".encode() + data
        if index == 0:
            stream += f"from {parent}\n".encode()
        stream += b"\n"
    subprocess.run(
        ["git", "fast-import", "--quiet", "--force"],
        input=bytes(stream),
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return subprocess.run(
        ["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


class Counter:
    """Commits parsed in this process (the server's reads), whoever parses them."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Counter:
        original = Commit._deserialize

        def counted(commit: Commit, chunks: list[bytes]) -> None:
            with self._lock:
                self.value += 1
            original(commit, chunks)

        monkeypatch.setattr(Commit, "_deserialize", counted)
        return self

    def during(self, action: Callable[[], Any]) -> tuple[int, Any]:
        before = self.value
        result = action()
        return self.value - before, result


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Counter:
    return Counter().install(monkeypatch)


def pkt(line: str) -> bytes:
    data = line.encode()
    return f"{len(data) + 4:04x}".encode() + data


def upload_pack(
    url: str, token: str, body: bytes, timeout: float = 300.0
) -> tuple[int, bytes, dict[str, str]]:
    """One raw upload-pack POST with the agent's token: status, body, headers."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    basic = base64.b64encode(f"any:{token}".encode()).decode()
    try:
        connection.request(
            "POST",
            f"{parts.path}/git-upload-pack",
            body=body,
            headers={
                "Content-Type": "application/x-git-upload-pack-request",
                "Authorization": f"Basic {basic}",
            },
        )
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


@dataclass
class LongFork:
    project: Project
    token: str
    clone_url: str
    repo: Path  # the agent's local repository: the whole history
    base: str  # canonical's head, the fork's root
    tip: str  # the fork's head, LONG commits above base
    review: str  # a review of tip, approved by the owner


@pytest.fixture(scope="module")
def long_fork(server: Server) -> LongFork:
    """An advisory project whose agent pushed LONG empty commits (two pushes, as the issue's
    attacker did), asked for a review of the tip and had it approved."""
    project = new_project(server, False)
    lane = new_lane(project, "walker")
    assert lane.agent.token is not None
    half = fast_import(lane.tree.path, LONG // 2, "first")
    lane.tree.push(lane.fork["cloneUrl"], lane.agent.token)
    tip = fast_import(lane.tree.path, LONG - LONG // 2, "second")
    lane.tree.push(lane.fork["cloneUrl"], lane.agent.token)
    assert half != tip
    review = lane.request_review(tip)
    server.owner.wait_receipt(project.id, review["id"])
    path = f"/projects/{project.id}/reviews/{review['id']}"
    server.owner.ok("POST", f"{path}/approve", {"commit": tip})
    return LongFork(
        project,
        lane.agent.token,
        lane.fork["cloneUrl"],
        lane.tree.path,
        project.initial,
        tip,
        review["id"],
    )


# --- 1. history walks: the gate the console polls --------------------------------------
def test_repeated_gate_polls_read_no_commits_after_the_first(
    server: Server, long_fork: LongFork, parsed: Counter
) -> None:
    path = f"/projects/{long_fork.project.id}/reviews/{long_fork.review}/gate"
    first, gate = parsed.during(lambda: server.owner.ok("GET", path))
    assert gate["promote"] == {"allowed": True, "reasons": []}, gate
    # The first question may read the pushed history, each commit once (and no more).
    assert first <= LONG + SMALL, first
    polls = [parsed.during(lambda: server.owner.ok("GET", path))[0] for _ in range(5)]
    assert max(polls) <= SMALL, polls  # was LONG + 1 commits read per poll


def test_a_new_commit_on_top_reads_only_itself(tmp_path: Path) -> None:
    """The agent keeps pushing one commit at a time over a long history: each question
    about the new head reads the new commit and stops at the remembered answer below it."""
    source = new_repo(tmp_path / "source")
    base = commit_all(source, "import")
    tip = fast_import(source, 3_000)
    store = DiskGitHost(tmp_path / "state").store("proj")
    store.create_canonical()
    import_objects(store, source)
    ancestry = GenerationAncestry(SqliteAncestryMemo(tmp_path / "ancestry.sqlite"))
    reads = _ReadCounter(store)
    assert reads.during(lambda: ancestry.is_ancestor(store, base, tip)) == (3_001, True)
    for _ in range(3):
        tip = fast_import(source, 1)
        import_objects(store, source)
        assert reads.during(partial(ancestry.is_ancestor, store, base, tip)) == (1, True)
    # A restart keeps what was learned: the file is the memo.
    again = GenerationAncestry(SqliteAncestryMemo(tmp_path / "ancestry.sqlite"))
    assert reads.during(lambda: again.is_ancestor(store, base, tip)) == (0, True)
    assert reads.during(lambda: again.is_ancestor(store, tip, base)) == (0, False)


def test_the_home_memo_keeps_a_bounded_number_of_rows_per_project(tmp_path: Path) -> None:
    """Commits an agent pushes (and gc later removes) must not grow the memo for good: past
    its bound a project's rows are cleared, other projects' stay, and answers stay right."""
    source = new_repo(tmp_path / "source")
    base = commit_all(source, "import")
    tip = fast_import(source, 300)
    store = DiskGitHost(tmp_path / "state").store("proj")
    store.create_canonical()
    import_objects(store, source)
    path = tmp_path / "ancestry.sqlite"
    ancestry = GenerationAncestry(SqliteAncestryMemo(path, rows=500))
    other = DiskGitHost(tmp_path / "state").store("other")
    other.create_canonical()
    import_objects(other, source)
    assert ancestry.is_ancestor(other, base, tip)
    for _ in range(5):
        tip = fast_import(source, 100)
        import_objects(store, source)
        assert ancestry.is_ancestor(store, base, tip)
        assert not ancestry.is_ancestor(store, tip, base)
        assert _memo_rows(path, "proj") <= 500
    assert _memo_rows(path, "other") == 302  # 301 commits and one answer, untouched


def _memo_rows(path: Path, project: str) -> int:
    with closing(sqlite3.connect(path)) as db:
        return sum(
            db.execute(f"SELECT COUNT(*) FROM {table} WHERE project = ?", (project,)).fetchone()[0]
            for table in ("commits", "answers")
        )


class _ReadCounter:
    def __init__(self, store: DulwichGitStore) -> None:
        self._store = store
        self.value = 0
        original = store.read_commit

        def counted(sha: str) -> Any:
            self.value += 1
            return original(sha)

        store.read_commit = counted  # type: ignore[method-assign]

    def during(self, action: Callable[[], Any]) -> tuple[int, Any]:
        before = self.value
        result = action()
        return self.value - before, result


@pytest.mark.parametrize("memo", ["sqlite", "memory"])
def test_one_ancestry_question_is_bounded_and_the_next_goes_on(
    host: Any, tmp_path: Path, memo: str
) -> None:
    """On both stores (disk, and S3/DynamoDB with the AWS wiring's memory memo): a question
    past the bound is refused, keeps what it read, and asking again finishes the answer;
    the answers match git's own."""
    source = new_repo(tmp_path / "source")
    base = commit_all(source, "import")
    tip = fast_import(source, 2_500)
    middle = git("rev-parse", "main~1000", cwd=source)
    store = host.store("proj")
    store.create_canonical()
    import_objects(store, source)
    kept = (
        SqliteAncestryMemo(tmp_path / "ancestry.sqlite")
        if memo == "sqlite"
        else MemoryAncestryMemo()
    )
    ancestry = GenerationAncestry(kept, limit=1_000)
    reads = _ReadCounter(store)
    for _ in range(2):
        with pytest.raises(HistoryTooLong):
            ancestry.is_ancestor(store, base, tip)
        assert reads.value <= 1_001 * (_ + 1)
    assert reads.during(lambda: ancestry.is_ancestor(store, base, tip))[1] is True
    assert reads.value <= 2_502  # each commit read once over the three questions
    assert reads.during(lambda: ancestry.is_ancestor(store, middle, tip)) == (0, True)
    assert reads.during(lambda: ancestry.is_ancestor(store, tip, middle)) == (0, False)
    assert reads.during(lambda: ancestry.is_ancestor(store, tip, tip)) == (0, True)


# --- 2. negotiation walks: 150-byte fetches against a long fork ------------------------
def test_a_fetch_with_unknown_or_deep_haves_reads_a_bounded_number_of_commits(
    long_fork: LongFork, parsed: Counter
) -> None:
    tree = git("rev-parse", f"{long_fork.tip}^{{tree}}", cwd=long_fork.repo)
    deep = git("rev-parse", f"{long_fork.tip}~{LONG - 10}", cwd=long_fork.repo)
    want = pkt(f"want {long_fork.tip} {CAPS}\n")
    shallow = want + pkt("deepen 1\n") + b"0000"
    bound = GIT_WALKS.negotiation_commits + SMALL
    cases = {
        # A missing object and a tree: one lookup each, no walk (was the whole history).
        "missing and tree haves": (
            shallow + pkt(f"have {'1' * 40}\n") + pkt(f"have {tree}\n") + pkt("done\n"),
            SMALL,
        ),
        # A commit near the bottom of the history: the visibility walk stops at its bound
        # and drops it (was a walk of the whole history).
        "a deep have": (shallow + pkt(f"have {deep}\n") + pkt("done\n"), bound),
        # A round without done: ACKs only, no pack counted (was the whole clone counted).
        "a round without done": (want + b"0000" + pkt(f"have {long_fork.base}\n") + b"0000", bound),
        "a round without haves or done": (want + b"0000" + b"0000", bound),
        # An up-to-date client: the haves' own history is walked at most to the bound.
        "an up-to-date fetch": (
            want + b"0000" + pkt(f"have {long_fork.tip}\n") + pkt("done\n"),
            bound,
        ),
    }
    spent = {}
    for name, (body, _) in cases.items():
        before = parsed.value
        status, answer, _ = upload_pack(long_fork.clone_url, long_fork.token, body)
        assert status == 200, (name, status, answer[:200])
        spent[name] = parsed.value - before
    over = {name: spent[name] for name, (_, limit) in cases.items() if spent[name] > limit}
    assert not over, spent  # the old code read 24,000 to 72,000 commits in each


def test_a_small_fetch_does_not_inflate_every_stored_object(
    long_fork: LongFork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reusing stored deltas means scanning every pack whole (dulwich): a fetch of the last
    commit of a long fork inflated every object the project stores."""
    scanned = [0]
    original = PackData.iter_unpacked

    def counted(data: PackData, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for unpacked in original(data, *args, **kwargs):
            scanned[0] += 1
            yield unpacked

    monkeypatch.setattr(PackData, "iter_unpacked", counted)
    body = pkt(f"want {long_fork.tip} {CAPS}\n") + pkt("deepen 1\n") + b"0000" + pkt("done\n")
    status, answer, _ = upload_pack(long_fork.clone_url, long_fork.token, body)
    assert status == 200, answer[:200]
    assert b"PACK" in answer
    assert scanned[0] <= SMALL, scanned  # was every object of the project: LONG and more


def test_an_incremental_fetch_over_a_long_history_is_right_and_bounded(
    long_fork: LongFork, parsed: Counter, tmp_path: Path
) -> None:
    """The real git CLI, whose repository holds the whole long history, fetches what the
    agent pushed from elsewhere: it gets exactly that, and the server reads a bounded number
    of commits doing it."""
    other = tmp_path / "other"
    git("clone", "-q", "--local", str(long_fork.repo), str(other), cwd=tmp_path)
    (other / "NEW.md").write_text("new\n")
    new = commit_all(other, "pushed from elsewhere")
    url = long_fork.clone_url.replace("://", f"://any:{long_fork.token}@")
    git("push", "-q", url, "HEAD:refs/heads/side", cwd=other)
    count, _ = parsed.during(
        lambda: git("fetch", "-q", url, "refs/heads/side:refs/remotes/x/side", cwd=long_fork.repo)
    )
    assert git("rev-parse", "refs/remotes/x/side", cwd=long_fork.repo) == new
    assert git("cat-file", "-p", f"{new}:NEW.md", cwd=long_fork.repo) == "new"
    assert count <= 3 * GIT_WALKS.negotiation_commits, count


# --- 3. git requests have their own slots: the API still answers ------------------------
def test_expensive_fetches_leave_threads_for_the_api_and_other_projects(
    server: Server, long_fork: LongFork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More expensive fetches at once than the server has threads (each a clone of the long
    fork's last DEEP commits, with a have the server must look up): another project's state
    is answered while the admitted fetches are still running, and the fetches past the caps
    get git's own "busy" error (which git prints; issue 29) with Retry-After."""
    assert GIT_CONCURRENCY.requests + GIT_CONCURRENCY.waiting < THREADS
    other = new_project(server, False)
    attackers = THREADS + 2
    entered = threading.Semaphore(0)
    original = git_http.GitHttpApp.__call__

    def noted(app: Any, environ: dict[str, Any], start_response: Any) -> Any:
        entered.release()  # a server thread took the request
        return original(app, environ, start_response)

    monkeypatch.setattr(git_http.GitHttpApp, "__call__", noted)
    tree = git("rev-parse", f"{long_fork.tip}^{{tree}}", cwd=long_fork.repo)
    body = pkt(f"want {long_fork.tip} {CAPS}\n") + pkt(f"deepen {DEEP}\n") + b"0000"
    body += pkt(f"have {tree}\n") + pkt("done\n")
    finished: list[tuple[float, bool, dict[str, str]]] = []
    lock = threading.Lock()

    def fetch() -> None:
        status, answer, headers = upload_pack(long_fork.clone_url, long_fork.token, body, 600.0)
        assert status == 200, (status, answer[:200])
        with lock:
            finished.append((time.monotonic(), git_http.BUSY.encode() in answer[:200], headers))

    threads = [threading.Thread(target=fetch, daemon=True) for _ in range(attackers)]
    for thread in threads:
        thread.start()
    for _ in range(THREADS):  # every thread the server has is (or was) on a fetch
        assert entered.acquire(timeout=60), "the fetches never reached the server"
    status, _ = server.owner.call("GET", f"/projects/{other.id}/state")
    answered = time.monotonic()
    for thread in threads:
        thread.join(timeout=600)
    assert status == 200
    served = sorted(at for at, refused, _ in finished if not refused)
    busy = [headers for _, refused, headers in finished if refused]
    assert len(finished) == attackers
    assert served, finished
    assert answered < served[0], (answered, served)  # before any admitted fetch was done
    assert busy, finished
    retry = {int(headers["Retry-After"]) for headers in busy}
    assert retry == {GIT_CONCURRENCY.retry_after_seconds}, finished
