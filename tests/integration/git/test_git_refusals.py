"""Refusals the stock git CLI prints (issue 29): git shows nothing of a 4xx answer to its
POST but "RPC failed; HTTP <status>", so those are answered with git's own error lines."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.events import InProcessEventBus
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.domain.git_access import FORK_OWNER_ONLY, GitPrincipal
from forkhorse.githttp.admission import GitAdmission
from forkhorse.githttp.http import BUSY, GitHttpApp

from tests.support.gitserve import PROJECT, Directory, Served, commit_all, git, new_repo


def app_with(tmp_path: Path, serve_app: Callable[[Any], str], **options: Any) -> Served:
    directory = Directory(
        tokens={
            "owner-token": GitPrincipal("owner-1", "owner"),
            "agent-a-token": GitPrincipal("agent-a", "agent"),
        },
        members={"agent-a"},
        forks={"fa": "agent-a"},
    )
    host = DiskGitHost(tmp_path / "state")
    if not host.store(PROJECT).exists():
        host.store(PROJECT).create_canonical()
    events = InProcessEventBus()
    app = GitHttpApp(host, directory.resolve, directory.lookup, events, **options)
    return Served(serve_app(app), host, events, directory)


@pytest.fixture
def imported(tmp_path: Path, serve_app: Callable[[Any], str]) -> tuple[Served, Path]:
    served = app_with(tmp_path, serve_app)
    source = new_repo(tmp_path / "owner")
    (source / "noise.bin").write_bytes(os.urandom(64 * 1024))
    commit_all(source, "import")
    git("push", served.remote("owner-token"), "main", cwd=source)
    served.store.create_fork("fa")
    return served, source


def test_a_push_over_the_request_limit_prints_the_limit(
    imported: tuple[Served, Path], tmp_path: Path, serve_app: Callable[[Any], str]
) -> None:
    _, source = imported
    small = app_with(tmp_path, serve_app, max_request_bytes=4096)
    (source / "more.bin").write_bytes(os.urandom(64 * 1024))
    commit_all(source, "more")
    output = git("push", small.remote("agent-a-token", "fa"), "main", cwd=source, check=False)
    assert "remote: The request body is larger than 4096 bytes" in output, output
    assert "RPC failed" not in output


def test_a_clone_over_the_request_or_send_limit_prints_the_limit(
    imported: tuple[Served, Path], tmp_path: Path, serve_app: Callable[[Any], str]
) -> None:
    assert imported
    tiny = app_with(tmp_path, serve_app, max_request_bytes=100)
    output = git(
        "-c",
        "protocol.version=0",
        "clone",
        tiny.remote("agent-a-token"),
        "a",
        cwd=tmp_path,
        check=False,
    )
    assert "fatal: remote error: The request body is larger than 100 bytes" in output, output
    budget = app_with(tmp_path, serve_app, clone_inflated_bytes=1024)
    output = git("clone", budget.remote("agent-a-token"), "b", cwd=tmp_path, check=False)
    assert "would send more than 1024 bytes of objects" in output, output
    assert "RPC failed" not in output


def test_a_busy_server_and_a_refused_post_print_their_sentence(
    imported: tuple[Served, Path], tmp_path: Path, serve_app: Callable[[Any], str]
) -> None:
    served, source = imported

    class OneRequest(GitAdmission):
        """Admits the first request (git's GET) and finds every slot taken after it."""

        served = 0

        @contextmanager
        def admitted(self, project: str) -> Iterator[bool]:
            self.served += 1
            with super().admitted(project) as admitted:
                yield admitted and self.served == 1

    full = app_with(tmp_path, serve_app, admission=OneRequest())
    output = git("clone", full.remote("agent-a-token"), "c", cwd=tmp_path, check=False)
    assert f"remote error: {BUSY}" in output, output
    # A refused GET is text, which git prints as `remote: <why>`.
    output = git("push", served.remote("owner-token", "fa"), "main", cwd=source, check=False)
    assert f"remote: {FORK_OWNER_ONLY}" in output, output
