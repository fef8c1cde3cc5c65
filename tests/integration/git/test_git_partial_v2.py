"""Partial clones and protocol version 2 with the real git CLI (issue 29)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from forkhorse.adapters.git.s3 import S3GitHost

from tests.hostile.test_git_serve import pkt, post
from tests.integration.git.test_git_http_function import (  # noqa: F401 - fixtures
    as_api_gateway,
    aws,
    function,
)
from tests.support.gitserve import Served, commit_all, git, new_repo

BIG = "x" * 4096 + "\n"


@pytest.fixture
def history(served: Served, tmp_path: Path) -> tuple[Served, list[str]]:
    """Canonical with three commits (a nested directory, a small and a large file); forks
    fa (agent-a) and fb (agent-b), fb holding a commit only it has."""
    source = new_repo(tmp_path / "owner")
    heads = []
    for step in range(3):
        (source / "dir" / "sub").mkdir(parents=True, exist_ok=True)
        (source / "small.txt").write_text(f"small {step}\n")
        (source / "big.txt").write_text(f"{step}\n" + BIG)
        (source / "dir" / "sub" / "deep.txt").write_text(f"deep {step}\n")
        heads.append(commit_all(source, f"step {step}"))
    output = git("push", served.remote("owner-token"), "main", cwd=source, check=False)
    assert served.store.head() == heads[-1], output
    served.store.create_fork("fa")
    served.store.create_fork("fb")
    return served, heads


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True
    )


def missing(work: Path) -> set[str]:
    listed = git("rev-list", "--objects", "--all", "--missing=print", cwd=work)
    return {line[1:] for line in listed.splitlines() if line.startswith("?")}


def test_blob_none_clone_fetches_blobs_lazily(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, _heads = history
    work = tmp_path / "partial"
    out = run(
        "clone",
        "-q",
        "--filter=blob:none",
        "--no-checkout",
        served.remote("agent-a-token"),
        str(work),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert len(missing(work)) == 9  # three versions of three files
    out = run("checkout", "-q", "main", cwd=work)
    assert out.returncode == 0, out.stderr
    assert (work / "dir" / "sub" / "deep.txt").read_text() == "deep 2\n"
    assert len(missing(work)) == 6
    out = run("log", "-p", cwd=work)
    assert out.returncode == 0, out.stderr
    assert "+deep 0" in out.stdout
    assert missing(work) == set()


def clone(served: Served, tmp_path: Path, *args: str, token: str = "agent-a-token") -> Path:
    work = tmp_path / "clone"
    out = run("clone", "-q", *args, served.remote(token), str(work), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return work


def test_tree_zero_clone_fetches_trees_and_blobs_lazily(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, heads = history
    work = clone(served, tmp_path, "--filter=tree:0", "--no-checkout")
    assert git("cat-file", "-t", heads[0], cwd=work) == "commit"  # every commit came
    assert len(missing(work)) == 3  # only the three root trees are known (and missing)
    out = run("checkout", "-q", "main", cwd=work)
    assert out.returncode == 0, out.stderr
    assert (work / "dir" / "sub" / "deep.txt").read_text() == "deep 2\n"
    assert git("log", "--format=%s", cwd=work).splitlines() == ["step 2", "step 1", "step 0"]


def test_blob_limit_leaves_out_only_large_blobs(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, _ = history
    work = clone(served, tmp_path, "--filter=blob:limit=1k", "--no-checkout")
    absent = missing(work)
    assert len(absent) == 3  # the three versions of big.txt
    assert {git("cat-file", "-s", sha, cwd=work) for sha in absent} == {str(len(BIG) + 2)}
    out = run("checkout", "-q", "main", cwd=work)
    assert out.returncode == 0, out.stderr
    assert (work / "big.txt").read_text() == "2\n" + BIG


def test_an_unsupported_filter_gets_a_full_clone(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, heads = history
    spec = f"--filter=sparse:oid={heads[0]}"
    work = clone(served, tmp_path, spec)
    assert missing(work) == set()
    assert (work / "small.txt").read_text() == "small 2\n"


@pytest.mark.parametrize("version", ["0", "2"])
def test_each_protocol_version_serves_partial_clones(
    history: tuple[Served, list[str]], tmp_path: Path, version: str
) -> None:
    served, _ = history
    work = tmp_path / "clone"
    env = {"GIT_TRACE_PACKET": "1"}
    out = run(
        "-c",
        f"protocol.version={version}",
        "clone",
        "--filter=blob:none",
        served.remote("agent-a-token"),
        str(work),
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert ("command=fetch" in out.stderr) == (version == "2")
    assert ("< version 2" in out.stderr) == (version == "2")
    assert (work / "dir" / "sub" / "deep.txt").read_text() == "deep 2\n"
    out = run("-c", f"protocol.version={version}", "log", "-p", cwd=work)
    assert out.returncode == 0, out.stderr
    assert "+small 0" in out.stdout
    assert missing(work) == set()


def test_protocol_v2_clone_fetch_and_ls_remote(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, heads = history
    env = {"GIT_TRACE_PACKET": "1"}
    remote = served.remote("agent-a-token", "fa")
    listed = run("-c", "protocol.version=2", "ls-remote", "--symref", remote, cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "command=ls-refs" in listed.stderr
    assert f"{heads[-1]}\trefs/heads/main" in listed.stdout
    assert "ref: refs/heads/main\tHEAD" in listed.stdout
    work = tmp_path / "clone"
    out = run("-c", "protocol.version=2", "clone", remote, str(work), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "< version 2" in out.stderr
    assert "packfile" in out.stderr
    (work / "new.txt").write_text("new\n")
    git("add", "-A", cwd=work)
    run("commit", "-q", "-m", "agent work", cwd=work)
    out = run("push", "-q", "origin", "main:topic", cwd=work)  # pushes stay on version 0
    assert out.returncode == 0, out.stderr
    other = tmp_path / "other"
    out = run("clone", "-q", "--depth", "1", remote, str(other), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = run("-c", "protocol.version=2", "fetch", "origin", "topic", cwd=other, env=env)
    assert out.returncode == 0, out.stderr
    assert "command=fetch" in out.stderr
    assert (
        run("rev-parse", "FETCH_HEAD", cwd=other).stdout.strip()
        == served.store.refs("fa")["refs/heads/topic"]
    )
    out = run("-c", "protocol.version=2", "fetch", "-q", "origin", heads[0], cwd=work)
    assert out.returncode == 0, out.stderr  # a commit the refs reach may be wanted by id


@pytest.fixture
def secret(history: tuple[Served, list[str]], tmp_path: Path) -> tuple[str, str]:
    """agent-b's fork fb holds a branch with a blob and a commit nobody else may read."""
    served, _ = history
    work = tmp_path / "b"
    out = run("clone", "-q", served.remote("agent-b-token", "fb"), str(work), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (work / "secret.txt").write_text("agent b's secret\n")
    git("add", "-A", cwd=work)
    run("commit", "-q", "-m", "secret", cwd=work)
    out = run("push", "-q", "origin", "main:secret-branch", cwd=work)
    assert out.returncode == 0, out.stderr
    blob = git("rev-parse", "HEAD:secret.txt", cwd=work)
    return git("rev-parse", "HEAD", cwd=work), blob


@pytest.mark.parametrize("version", ["0", "2"])
def test_an_agent_never_lists_nor_fetches_another_agents_fork(
    history: tuple[Served, list[str]], secret: tuple[str, str], tmp_path: Path, version: str
) -> None:
    served, _ = history
    commit, blob = secret
    for repo in (None, "fa"):
        listed = run(
            "-c",
            f"protocol.version={version}",
            "ls-remote",
            served.remote("agent-a-token", repo),
            cwd=tmp_path,
        )
        assert listed.returncode == 0, listed.stderr
        assert "secret-branch" not in listed.stdout
        assert commit not in listed.stdout
    refused = run(
        "-c", "protocol.version=2", "ls-remote", served.remote("agent-a-token", "fb"), cwd=tmp_path
    )
    assert refused.returncode != 0
    assert "403" in refused.stderr
    work = tmp_path / "a"
    out = run(
        "-c",
        f"protocol.version={version}",
        "clone",
        "-q",
        "--filter=blob:none",
        served.remote("agent-a-token", "fa"),
        str(work),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    for sha in (blob, commit):
        lazy = run("-c", f"protocol.version={version}", "cat-file", "-p", sha, cwd=work)
        assert lazy.returncode != 0
        assert "secret" not in lazy.stdout
        fetched = run("-c", f"protocol.version={version}", "fetch", "origin", sha, cwd=work)
        assert fetched.returncode != 0
        assert "not our ref" in fetched.stderr or "400" in fetched.stderr
    # agent-b itself lazily fetches it from its own fork
    own = tmp_path / "b-partial"
    out = run(
        "-c",
        f"protocol.version={version}",
        "clone",
        "-q",
        "--filter=blob:none",
        "--no-checkout",
        served.remote("agent-b-token", "fb"),
        str(own),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    shown = run("-c", f"protocol.version={version}", "cat-file", "-p", blob, cwd=own)
    assert shown.stdout == "agent b's secret\n", shown.stderr


def test_protocol_v2_partial_clone_through_the_lambda_handler(
    function: tuple[ModuleType, S3GitHost],  # noqa: F811 - the imported fixture
    serve_app: Callable[[Any], str],
    tmp_path: Path,
) -> None:
    module, host = function
    url = serve_app(as_api_gateway(module.handler))
    source = new_repo(tmp_path / "owner")
    (source / "README.md").write_text("on s3\n")
    head = commit_all(source)
    git(
        "push",
        "-q",
        f"{url.replace('://', '://x:owner-token@')}/git/proj/canonical.git",
        "main",
        cwd=source,
    )
    assert host.store("proj").head() == head
    host.store("proj").create_fork("fa")
    work = tmp_path / "agent"
    remote = f"{url.replace('://', '://x:agent-a-token@')}/git/proj/forks/fa.git"
    out = run(
        "-c",
        "protocol.version=2",
        "clone",
        "--filter=blob:none",
        remote,
        str(work),
        cwd=tmp_path,
        env={"GIT_TRACE_PACKET": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert "command=fetch" in out.stderr
    assert (work / "README.md").read_text() == "on s3\n"


V2 = {"Git-Protocol": "version=2"}


def v2_request(command: str, *arguments: str) -> bytes:
    head = pkt(f"command={command}\n") + pkt("object-format=sha1\n") + b"0001"
    return head + b"".join(pkt(argument + "\n") for argument in arguments) + b"0000"


def test_v2_requests_keep_the_version_0_rules(
    history: tuple[Served, list[str]], secret: tuple[str, str]
) -> None:
    served, heads = history
    commit, blob = secret
    # a want another agent's fork alone reaches: git's not our ref, before any answer
    for sha in (commit, blob):
        status, body = post(
            served,
            "agent-a-token",
            "fa",
            "git-upload-pack",
            v2_request("fetch", f"want {sha}", "done"),
            V2,
        )
        assert (status, body[4:]) == (200, f"ERR upload-pack: not our ref {sha}\n".encode())
    # ls-refs lists what version 0 advertises: never another fork's refs
    status, body = post(
        served,
        "agent-a-token",
        "fa",
        "git-upload-pack",
        v2_request("ls-refs", "symrefs", "peel", "ref-prefix refs/"),
        V2,
    )
    assert status == 200
    assert b"secret-branch" not in body
    assert commit.encode() not in body
    assert f"{heads[-1]} refs/heads/main\n".encode() in body
    # a negotiation round without done: acknowledgments only, no pack
    haves = [f"have {sha}" for sha in heads[:2]] + [f"have {commit}"]
    haves += [f"have {index:040x}" for index in range(1, 400)]  # past negotiation_haves
    status, body = post(
        served,
        "agent-a-token",
        "fa",
        "git-upload-pack",
        v2_request("fetch", f"want {heads[-1]}", *haves),
        V2,
    )
    assert status == 200
    assert body.startswith(pkt("acknowledgments\n"))
    assert f"ACK {heads[0]}".encode() in body
    assert commit.encode() not in body  # the invisible have is never acknowledged
    assert b"packfile" not in body
    # then done: the pack, on side-band
    status, body = post(
        served,
        "agent-a-token",
        "fa",
        "git-upload-pack",
        v2_request("fetch", f"want {heads[-1]}", f"have {heads[1]}", "filter blob:none", "done"),
        V2,
    )
    assert status == 200
    assert body.startswith(pkt("packfile\n"))
    assert b"PACK" in body
    assert body.endswith(b"0000")
    for malformed in (
        v2_request("frobnicate"),
        v2_request("fetch", "want-ref refs/heads/main", "done"),
        v2_request("fetch", "want 1234", "done"),
        pkt("command=fetch\n") + pkt("want x\n"),  # no delim, no flush
    ):
        status, body = post(served, "agent-a-token", "fa", "git-upload-pack", malformed, V2)
        assert status == 400, (malformed, body)
        assert body[4:8] == b"ERR "


def test_a_partial_clone_fetches_on_and_combines_with_depth(
    history: tuple[Served, list[str]], tmp_path: Path
) -> None:
    served, _ = history
    work = clone(served, tmp_path, "--filter=blob:none", "--depth=1")
    assert git("rev-list", "--count", "HEAD", cwd=work) == "1"
    assert (work / "small.txt").read_text() == "small 2\n"
    out = run("fetch", "-q", "--deepen=1", cwd=work)
    assert out.returncode == 0, out.stderr
    assert git("rev-list", "--count", "HEAD", cwd=work) == "2"
    # new work on the agent's fork arrives with the clone's filter, blobs lazily after
    partial = clone_to(served, tmp_path / "p2", "agent-a-token", "fa")
    fork = tmp_path / "fork-work"
    out = run("clone", "-q", served.remote("agent-a-token", "fa"), str(fork), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (fork / "later.txt").write_text("later\n")
    git("add", "-A", cwd=fork)
    run("commit", "-q", "-m", "later", cwd=fork)
    assert run("push", "-q", "origin", "main", cwd=fork).returncode == 0
    out = run("pull", "-q", "--ff-only", cwd=partial)
    assert out.returncode == 0, out.stderr
    assert (partial / "later.txt").read_text() == "later\n"
    assert git("config", "remote.origin.partialclonefilter", cwd=partial) == "blob:none"


def clone_to(served: Served, work: Path, token: str, fork: str) -> Path:
    out = run(
        "clone", "-q", "--filter=blob:none", served.remote(token, fork), str(work), cwd=work.parent
    )
    assert out.returncode == 0, out.stderr
    return work
