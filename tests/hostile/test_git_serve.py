"""Hostile agents against the serving side of git smart HTTP and fork visibility (issue 13).

Real git CLI, real waitress servers on 127.0.0.1, real SQLite; memory read from /proc.
"""

from __future__ import annotations

import gzip
import http.client
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from dulwich.objects import ObjectID, Tag
from dulwich.refs import Ref
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.events import InProcessEventBus
from forkhorse.domain.limits import GIT, MIB
from forkhorse.githttp.http import GitHttpApp
from forkhorse.service.facade import ServiceSettings
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.integration.api.support import Client, ShiftClock, Worktree
from tests.support.gitrepo import commit_files
from tests.support.gitserve import Served, commit_all, git, new_repo
from tests.support.resources import peak_of, rss_bytes
from tests.support.wsgi import LoopbackWsgi

CEILING = 256 * MIB


# --- helpers ------------------------------------------------------------------------------
def pkt(line: str | bytes) -> bytes:
    data = line.encode() if isinstance(line, str) else line
    return f"{len(data) + 4:04x}".encode() + data


def post(
    served: Served,
    token: str,
    fork: str | None,
    service: str,
    body: bytes | Iterator[bytes],
    headers: dict[str, str] | None = None,
    length: int | None = None,
) -> tuple[int, bytes]:
    """One raw POST to a git service, the body streamed in chunks when it is an iterator."""
    url = urlsplit(served.remote(token, fork))
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
    sent = {
        "Content-Type": f"application/x-{service}-request",
        "Authorization": "Basic " + _basic(token),
        **(headers or {}),
    }
    if length is not None or isinstance(body, bytes):
        sent["Content-Length"] = str(length if length is not None else len(body))  # type: ignore[arg-type]
    try:
        connection.request("POST", f"{url.path}/{service}", body=body, headers=sent)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _basic(token: str) -> str:
    import base64

    return base64.b64encode(f"any:{token}".encode()).decode()


def zeros(total: int, step: int = MIB) -> Iterator[bytes]:
    chunk = bytes(step)
    for start in range(0, total, step):
        yield chunk[: min(step, total - start)]


@pytest.fixture
def two_agents(served: Served, tmp_path: Path) -> tuple[Served, str, str]:
    """Canonical imported; agent A pushed unpublished work to fa; fb is B's fork."""
    source = new_repo(tmp_path / "owner")
    (source / "README.md").write_text("hello\n")
    commit_all(source, "import")
    git("push", served.remote("owner-token"), "main", cwd=source)
    served.store.create_fork("fa")
    served.store.create_fork("fb")
    work = tmp_path / "agent-a"
    git("clone", "-q", served.remote("agent-a-token", "fa"), str(work), cwd=tmp_path)
    (work / "secret.txt").write_text("agent A's unpublished work\n")
    secret = commit_all(work, "A's secret")
    git("push", served.remote("agent-a-token", "fa"), "main", cwd=work)
    assert served.store.head("fa") == secret
    return served, secret, str(served.store.head("fb"))


# --- 1. fork isolation, read side -----------------------------------------------------
def test_an_agent_cannot_fetch_another_agents_head_by_sha(
    two_agents: tuple[Served, str, str], tmp_path: Path
) -> None:
    served, secret, b_head = two_agents
    clone = tmp_path / "agent-b"
    git("clone", "-q", served.remote("agent-b-token", "fb"), str(clone), cwd=tmp_path)
    with peak_of(rss_bytes) as memory:
        fetched = git("fetch", "origin", secret, cwd=clone, check=False)
        status, body = post(
            served,
            "agent-b-token",
            "fb",
            "git-upload-pack",
            pkt(f"want {secret} multi_ack_detailed side-band-64k thin-pack ofs-delta\n")
            + b"0000"
            + pkt("done\n"),
        )
        # A have of A's commit is neither acknowledged nor used to trim the pack.
        probe_status, probe = post(
            served,
            "agent-b-token",
            "fb",
            "git-upload-pack",
            pkt(f"want {b_head} multi_ack_detailed side-band-64k thin-pack ofs-delta\n")
            + b"0000"
            + pkt(f"have {secret}\n")
            + pkt("done\n"),
        )
    assert "fatal" in fetched.lower() or "error" in fetched.lower(), fetched
    assert (status, body[4:]) == (200, f"ERR upload-pack: not our ref {secret}\n".encode())
    assert probe_status == 200
    assert secret.encode() not in probe
    assert b"NAK" in probe
    missing = git("cat-file", "-e", secret, cwd=clone, check=False)
    assert "fatal" in missing.lower() or (missing == "" and not _has_object(clone, secret))
    assert memory.growth < CEILING


def _has_object(repo: Path, sha: str) -> bool:
    return "commit" in git("cat-file", "-t", sha, cwd=repo, check=False)


# --- 7. malformed requests: 4xx and git's own error, never a 500 ------------------------
def test_malformed_git_requests_get_a_4xx_and_change_nothing(
    two_agents: tuple[Served, str, str],
) -> None:
    served, _, b_head = two_agents
    want = pkt(f"want {b_head} multi_ack_detailed side-band-64k ofs-delta\n") + b"0000"
    cases: list[tuple[str, str, bytes, dict[str, str], int]] = [
        ("bad pkt-line", "git-upload-pack", b"zzzzwant", {}, 400),
        ("bad pkt-line, push", "git-receive-pack", b"00x1", {}, 400),
        ("truncated pkt-line", "git-upload-pack", b"00ffwant", {}, 400),
        ("empty body", "git-upload-pack", b"", {}, 400),
        ("empty body, push", "git-receive-pack", b"", {}, 400),
        ("garbage gzip", "git-upload-pack", b"\x1f\x8bnot gzip at all", _GZIP, 400),
        ("garbage gzip, push", "git-receive-pack", b"garbage", _GZIP, 400),
        # git can meet this one (a ref moved): answered so that git prints it (issue 29)
        ("unadvertised want", "git-upload-pack", pkt(f"want {'1' * 40}\n") + b"0000", {}, 200),
        ("unknown command", "git-upload-pack", pkt("frobnicate\n") + b"0000", {}, 400),
        (  # filters are served (`filters.py`); wants must still end with a flush
            "wants not ended by a flush",
            "git-upload-pack",
            want[:-4] + pkt("filter blob:none\n"),
            {},
            400,
        ),
        (
            "unknown capability",
            "git-upload-pack",
            pkt(f"want {b_head} evil-cap\n") + b"0000",
            {},
            400,
        ),
        ("wrong content type", "git-upload-pack", want, {"Content-Type": "text/plain"}, 415),
        ("unknown encoding", "git-upload-pack", want, {"Content-Encoding": "br"}, 415),
    ]
    before = {fork: served.store.refs(fork) for fork in (None, "fa", "fb")}
    events = len(served.events.published)
    for name, service, body, headers, expected in cases:
        status, answer = post(served, "agent-b-token", "fb", service, body, headers)
        assert status == expected, (name, status, answer)
        assert b"ERR " in answer, (name, answer)  # git's own error line says why
    assert _get(served, "/info/refs?service=git-frobnicate").startswith("403")
    assert _get(served, "/git-upload-pack").startswith("404")
    assert {fork: served.store.refs(fork) for fork in (None, "fa", "fb")} == before
    assert len(served.events.published) == events


_GZIP = {"Content-Encoding": "gzip"}


def _get(served: Served, path: str) -> str:
    url = urlsplit(served.remote("agent-b-token", "fb"))
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        connection.request(
            "GET", url.path + path, headers={"Authorization": "Basic " + _basic("agent-b-token")}
        )
        response = connection.getresponse()
        return f"{response.status} {response.read().decode(errors='replace')}"
    finally:
        connection.close()


def test_a_body_over_the_limit_is_refused_and_never_held_in_memory(
    two_agents: tuple[Served, str, str],
    serve_app: Callable[[Any], str],
) -> None:
    served, _, b_head = two_agents
    over = GIT.request_bytes + MIB  # 51 MiB
    # A gzip body of one have line repeated: valid git all the way, small on the wire. It is
    # sent to an app with a 2 MiB limit, so the test walks 8 MiB, not 51 MiB, of haves.
    limit = 2 * MIB
    have = pkt(f"have {b_head}\n")
    head = pkt(f"want {b_head} multi_ack_detailed side-band-64k ofs-delta\n") + b"0000"
    bomb = gzip.compress(head + have * (4 * limit // len(have)), compresslevel=9)
    assert len(bomb) < limit // 4
    small = GitHttpApp(
        served.host,
        served.directory.resolve,
        served.directory.lookup,
        InProcessEventBus(),
        max_request_bytes=limit,
    )
    limited = Served(serve_app(small), served.host, served.events, served.directory)
    before = served.store.refs("fb")
    with peak_of(rss_bytes) as memory:
        declared = post(served, "agent-b-token", "fb", "git-receive-pack", zeros(over), length=over)
        upload_bomb = post(limited, "agent-b-token", "fb", "git-upload-pack", bomb, _GZIP)
        push_bomb = post(limited, "agent-b-token", "fb", "git-receive-pack", bomb, _GZIP)
    # answered 200 with git's own error, which the client prints (issue 29): the push's on
    # the side-band error channel (`remote: ...`), the fetch's as an ERR line
    assert declared[0] == 200, declared
    assert declared[1].startswith(b"007c\x03The request body is larger than"), declared
    assert upload_bomb[0] == 200, upload_bomb
    assert b"ERR The request body is larger than 2097152 bytes" in upload_bomb[1]
    assert push_bomb[0] in (200, 400), push_bomb
    assert b"ERR " in push_bomb[1] or b"\x03" in push_bomb[1], push_bomb
    assert served.store.refs("fb") == before
    print(f"body-limit growth {memory.growth // MIB} MiB")
    assert memory.growth < 64 * MIB, memory.growth


# --- 3. the clone side is bounded -------------------------------------------------------
def test_a_clone_of_a_large_object_stays_bounded_and_the_budget_ends_it(
    served: Served,
    serve_app: Callable[[Any], str],
    tmp_path: Path,
) -> None:
    store = served.store
    big = commit_files(store, {"big.bin": os.urandom(GIT.object_bytes - 1024)})
    store.create_fork("fa")
    assert store.update_fork_ref("fa", "refs/heads/main", store.head("fa"), big)
    with peak_of(rss_bytes) as memory:
        git("clone", "-q", served.remote("agent-a-token", "fa"), str(tmp_path / "c1"), cwd=tmp_path)
    assert (tmp_path / "c1" / "big.bin").stat().st_size == GIT.object_bytes - 1024
    print(f"clone growth {memory.growth // MIB} MiB")
    assert memory.growth < CEILING, memory.growth

    small = GitHttpApp(
        served.host,
        served.directory.resolve,
        served.directory.lookup,
        InProcessEventBus(),
        clone_inflated_bytes=4 * MIB,
    )
    limited = Served(serve_app(small), served.host, served.events, served.directory)
    with peak_of(rss_bytes) as refused_memory:
        output = git(
            "clone",
            "-q",
            limited.remote("agent-a-token", "fa"),
            str(tmp_path / "c2"),
            cwd=tmp_path,
            check=False,
        )
    assert f"more than {4 * MIB} bytes" in output, output
    print(f"refused clone growth {refused_memory.growth // MIB} MiB")
    assert refused_memory.growth < CEILING


# --- /state and reviews through the API -------------------------------------------------
@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, LocalApp, str]]:
    home = tmp_path_factory.mktemp("hostile-serve")
    holder: dict[str, Any] = {}
    server = LoopbackWsgi(lambda environ, start: holder["app"](environ, start))
    url = server.url
    runtime = build_local_runtime(
        home / "home", clock=ShiftClock(), images=ImageRegistry(home / "i")
    )
    app = build_local_app(runtime, ServiceSettings(public_url=url))
    holder["app"] = app.http
    _, owner_token = app.service.projects.create_principal("owner", "owner")
    server.start()
    yield url, app, owner_token
    server.stop()
    app.close()


def _lane(
    url: str, owner: Client, project: str, name: str, work: Path
) -> tuple[Client, dict[str, Any], Worktree]:
    created = owner.ok("POST", "/agents", {"name": name}, expect=201)
    owner.ok(
        "POST", f"/projects/{project}/members", {"agentId": created["agent"]["id"]}, expect=201
    )
    agent = Client(url, created["token"])
    fork = agent.ok("POST", f"/projects/{project}/forks", {"name": name}, expect=201)["fork"]
    tree = Worktree(work)
    tree.git(agent.token, "pull", "-q", fork["cloneUrl"], "main")
    return agent, fork, tree


def test_state_shows_an_agent_only_canonical_and_its_own_forks(
    api: tuple[str, LocalApp, str], tmp_path: Path
) -> None:
    url, _, owner_token = api
    owner = Client(url, owner_token)
    project = owner.ok("POST", "/projects", {"name": "iso", "requireReceipt": False}, expect=201)[
        "project"
    ]
    base = Worktree(tmp_path / "base")
    base.commit({"README.md": "hi\n"}, "import")
    base.push(project["cloneUrl"], owner_token)
    agent_a, fork_a, tree_a = _lane(url, owner, project["id"], "alpha", tmp_path / "a")
    agent_b, fork_b, _ = _lane(url, owner, project["id"], "beta", tmp_path / "b")
    secret = tree_a.commit({"secret.txt": "unpublished\n"}, "A's work")
    assert agent_a.token is not None
    tree_a.push(fork_a["cloneUrl"], agent_a.token)
    packet = owner.ok("POST", f"/projects/{project['id']}/packets", {"title": "t"}, expect=201)[
        "packet"
    ]["id"]
    agent_a.ok("POST", f"/projects/{project['id']}/packets/{packet}/claim", expect=201)
    body = {"packetId": packet, "forkId": fork_a["id"], "commit": secret}
    agent_a.ok("POST", f"/projects/{project['id']}/reviews", body, 202)

    seen_by_b = agent_b.state(project["id"])
    assert [fork["id"] for fork in seen_by_b["forks"]] == [fork_b["id"]]
    assert secret not in str(seen_by_b)
    seen_by_a = agent_a.state(project["id"])
    assert [fork["id"] for fork in seen_by_a["forks"]] == [fork_a["id"]]
    assert secret in str(seen_by_a)
    seen_by_owner = owner.state(project["id"])
    assert {fork["id"] for fork in seen_by_owner["forks"]} == {fork_a["id"], fork_b["id"]}
    assert secret in str(seen_by_owner)


def test_a_tag_as_the_fork_head_is_refused_at_review_and_never_500s(
    api: tuple[str, LocalApp, str], tmp_path: Path
) -> None:
    url, app, owner_token = api
    owner = Client(url, owner_token)
    project = owner.ok("POST", "/projects", {"name": "tags", "requireReceipt": False}, expect=201)[
        "project"
    ]
    pid = project["id"]
    base = Worktree(tmp_path / "base")
    base.commit({"README.md": "hi\n"}, "import")
    base.push(project["cloneUrl"], owner_token)
    agent, fork, tree = _lane(url, owner, pid, "tagger", tmp_path / "t")
    commit = tree.commit({"work.txt": "work\n"}, "work")
    assert agent.token is not None
    tree.push(fork["cloneUrl"], agent.token)
    packet = owner.ok("POST", f"/projects/{pid}/packets", {"title": "t"}, expect=201)["packet"][
        "id"
    ]
    agent.ok("POST", f"/projects/{pid}/packets/{packet}/claim", expect=201)
    review = agent.ok(
        "POST",
        f"/projects/{pid}/reviews",
        {"packetId": packet, "forkId": fork["id"], "commit": commit},
        202,
    )["review"]

    # Legacy data: the fork's branch names an annotated tag object (written below the push
    # policy, as an older server could have accepted it).
    store = app.runtime.git.store(pid)
    tag = Tag()
    target = ObjectID(commit.encode())
    tag.object = (type(store.objects[target]), target)
    tag.name, tag.tagger, tag.message = b"v1", b"T <t@t>", b"tag\n"
    tag.tag_time, tag.tag_timezone = 1_790_000_000, 0
    store.objects.add_object(tag)
    refs = store._refs_container(fork["id"])
    assert refs.set_if_equals(Ref(b"refs/heads/main"), target, tag.id)

    status, answer = agent.call(
        "POST",
        f"/projects/{pid}/reviews",
        {"packetId": packet, "forkId": fork["id"], "commit": tag.id.decode()},
    )
    assert status == 409, answer
    assert "not a commit" in answer["error"]
    path = f"/projects/{pid}/reviews/{review['id']}"
    gate_status, _ = owner.call("GET", f"{path}/gate")
    promote_status, promoted = owner.call("POST", f"{path}/promote", {"commit": tag.id.decode()})
    assert gate_status == 200
    assert 400 <= promote_status < 500, promoted
