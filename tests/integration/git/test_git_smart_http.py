"""Real `git clone`, `git push` and `git fetch` against the smart-HTTP app on loopback."""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from forkhorse.ports.events import PUSH_EVENT

from tests.support.gitserve import PROJECT, Served, commit_all, git, new_repo


def push(served: Served, source: Path, token: str, fork: str | None = None, *refs: str) -> str:
    remote = served.remote(token, fork)
    return git("push", remote, *(refs or ("main",)), cwd=source, check=False)


@pytest.fixture
def imported(served: Served, tmp_path: Path) -> tuple[Served, Path, str]:
    """The owner's initial import of canonical, then two forks registered for two agents."""
    source = new_repo(tmp_path / "owner")
    (source / "README.md").write_text("hello\n")
    head = commit_all(source, "initial import")
    output = push(served, source, "owner-token")
    assert served.store.head() == head, output
    served.store.create_fork("fa")
    served.store.create_fork("fb")
    return served, source, head


def test_agent_clones_canonical_pushes_its_fork_and_a_push_event_is_raised(
    imported: tuple[Served, Path, str], tmp_path: Path
) -> None:
    served, _, head = imported
    work = tmp_path / "agent"
    git("clone", "-q", served.remote("agent-a-token"), str(work), cwd=tmp_path)
    assert (work / "README.md").read_text() == "hello\n"
    (work / "change.txt").write_text("agent work\n")
    new = commit_all(work, "agent change")
    output = git("push", served.remote("agent-a-token", "fa"), "main", cwd=work, check=False)
    assert served.store.head("fa") == new, output
    assert served.store.head() == head  # canonical untouched
    ((detail_type, detail),) = served.events.published
    assert detail_type == PUSH_EVENT
    assert detail["project"] == PROJECT
    assert detail["fork"] == "fa"
    assert detail["ref"] == "refs/heads/main"
    assert (detail["old"], detail["new"], detail["pusher"]) == (head, new, "agent-a")
    assert datetime.fromisoformat(str(detail["at"]).replace("Z", "+00:00")).tzinfo is not None


def test_fetch_sees_a_new_branch_on_the_agents_own_fork(
    imported: tuple[Served, Path, str], tmp_path: Path
) -> None:
    served, source, head = imported
    work = tmp_path / "agent"
    git("clone", "-q", served.remote("agent-a-token", "fa"), str(work), cwd=tmp_path)
    git("checkout", "-q", "-b", "topic", cwd=source)
    (source / "topic.txt").write_text("topic\n")
    topic = commit_all(source, "topic")
    push(served, source, "agent-a-token", "fa", "topic")
    git("fetch", "-q", "origin", cwd=work)
    assert git("rev-parse", "origin/topic", cwd=work) == topic
    assert [event[1]["old"] for event in served.events.published] == [None]
    assert served.store.head("fa") == head


def test_canonical_refuses_a_push_after_its_import(imported: tuple[Served, Path, str]) -> None:
    served, source, head = imported
    (source / "later.txt").write_text("later\n")
    commit_all(source, "after import")
    output = push(served, source, "owner-token")
    assert "403" in output or "initial import" in output
    assert served.store.refs() == {"refs/heads/main": head}
    assert served.events.published == []


def test_pushes_without_rights_are_refused_and_change_nothing(
    imported: tuple[Served, Path, str],
) -> None:
    served, source, head = imported
    (source / "x.txt").write_text("x\n")
    commit_all(source, "x")
    before = {fork: served.store.refs(fork) for fork in (None, "fa", "fb")}
    refusals = {
        ("agent-a-token", None): "403",  # agents never push canonical
        ("agent-a-token", "fb"): "403",  # nor a fork they do not own
        ("owner-token", "fa"): "403",  # the owner reads forks but does not push them
        ("stranger-token", "fa"): "Repository not found.",  # a non-member learns nothing
        ("wrong-token", "fa"): "Authentication failed",
    }
    for (token, fork), status in refusals.items():
        output = push(served, source, token, fork)
        assert status in output, (token, fork, output)
    assert {fork: served.store.refs(fork) for fork in (None, "fa", "fb")} == before
    assert served.events.published == []
    assert served.store.head() == head


def test_refusals_are_clear_http_statuses(imported: tuple[Served, Path, str]) -> None:
    served, _, _ = imported
    base = f"{served.url}/git/{PROJECT}"
    other = f"{served.url}/git/other"
    cases = [
        (f"{base}/canonical.git/info/refs?service=git-upload-pack", None, 401),
        (f"{base}/canonical.git/info/refs?service=git-upload-pack", "wrong", 401),
        (f"{base}/canonical.git/info/refs?service=git-upload-pack", "stranger-token", 404),
        (f"{base}/forks/fb.git/info/refs?service=git-upload-pack", "agent-a-token", 403),
        (f"{base}/forks/nope.git/info/refs?service=git-upload-pack", "agent-a-token", 404),
        (f"{other}/canonical.git/info/refs?service=git-upload-pack", "owner-token", 404),
        (f"{base}/canonical.git/info/refs?service=git-receive-pack", "agent-a-token", 403),
        (f"{base}/canonical.git/info/refs", "owner-token", 403),  # the dumb protocol
        (f"{base}/canonical.git/HEAD", "owner-token", 404),
        (f"{base}/canonical.git/objects/info/packs", "owner-token", 404),
    ]
    for url, token, status in cases:
        request = urllib.request.Request(url)
        if token:
            credentials = base64.b64encode(f"anyone:{token}".encode()).decode()
            request.add_header("Authorization", f"Basic {credentials}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == status, url
        assert refused.value.read().strip(), url  # every refusal says why
        if status == 401:
            assert "Basic" in refused.value.headers["WWW-Authenticate"]


def test_owner_reads_every_fork_and_members_read_canonical(
    imported: tuple[Served, Path, str], tmp_path: Path
) -> None:
    served, _, head = imported
    for index, (token, fork) in enumerate(
        [("owner-token", "fa"), ("owner-token", None), ("agent-b-token", None)]
    ):
        target = tmp_path / f"clone{index}"
        git("clone", "-q", served.remote(token, fork), str(target), cwd=tmp_path)
        assert git("rev-parse", "HEAD", cwd=target) == head


def test_two_pushes_racing_from_the_same_base_leave_one_winner(
    imported: tuple[Served, Path, str], tmp_path: Path
) -> None:
    served, _, _ = imported
    clones = []
    for index in range(2):
        work = tmp_path / f"racer{index}"
        git("clone", "-q", served.remote("agent-a-token", "fa"), str(work), cwd=tmp_path)
        (work / "race.txt").write_text(f"{index}\n")
        clones.append((work, commit_all(work, f"racer {index}")))
    push(served, clones[0][0], "agent-a-token", "fa")
    output = push(served, clones[1][0], "agent-a-token", "fa")
    assert "rejected" in output or "failed" in output
    assert served.store.head("fa") == clones[0][1]
    assert len(served.events.published) == 1


def test_an_empty_canonical_accepts_only_the_owner_import(served: Served, tmp_path: Path) -> None:
    source = new_repo(tmp_path / "agent-import")
    (source / "a").write_text("a")
    commit_all(source)
    assert "403" in push(served, source, "agent-a-token")
    assert served.store.refs() == {}


def test_a_push_over_the_request_limit_is_refused_and_changes_nothing(
    tmp_path: Path, serve_app: Any
) -> None:
    from forkhorse.adapters.events import InProcessEventBus
    from forkhorse.adapters.git.disk import DiskGitHost
    from forkhorse.domain.git_access import GitPrincipal
    from forkhorse.githttp.http import GitHttpApp

    from tests.support.gitserve import Directory, Served

    directory = Directory(tokens={"owner-token": GitPrincipal("owner-1", "owner")})
    host = DiskGitHost(tmp_path / "state")
    host.store(PROJECT).create_canonical()
    events = InProcessEventBus()
    app = GitHttpApp(host, directory.resolve, directory.lookup, events, max_request_bytes=4096)
    served = Served(serve_app(app), host, events, directory)
    source = new_repo(tmp_path / "big")
    (source / "noise.bin").write_bytes(os.urandom(64 * 1024))
    commit_all(source)
    output = push(served, source, "owner-token")
    assert "error" in output.lower() or "fatal" in output.lower()
    assert served.store.refs() == {}
