"""One live Forkhorse per test module: waitress on 127.0.0.1, SQLite, disk git, real
bubblewrap quick checks and real podman full checks on the busybox test image."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from forkhorse.adapters.containers.images import ImageRegistry

from tests.integration.api.support import checks_files
from tests.integration.containers.conftest import busybox_ref, podman  # noqa: F401
from tests.support.live import (
    CLAIM_TTL,
    PROMOTE_WAIT_SECONDS,
    Lane,
    Project,
    Server,
    new_lane,
    new_project,
    start_server,
)

__all__ = [
    "CLAIM_TTL",
    "PROMOTE_WAIT_SECONDS",
    "Lane",
    "Project",
    "Server",
    "new_lane",
    "new_project",
]


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    busybox_ref: str,  # noqa: F811
) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("forkhorse")
    registry = ImageRegistry(home / "images")
    registry.record("busybox", busybox_ref)
    live, stop = start_server(home / "home", registry)
    yield live
    stop()


GUARDED_MODULE = ".forkhorse/quick/ok.py"
# A project's own quick check (its bytes matter to the protected-checks policy).
GUARD = (
    "def check(ctx):\n"
    "    # The project's real check (the bytes matter here, not what it asserts).\n"
    "    return {'ok': True, 'message': 'Guarded.'}\n"
)


def new_guarded_project(
    server: Server, require_receipt: bool = True, protect_checks: bool = True
) -> Project:
    """A project whose canonical head declares one quick check (`GUARD`); the
    protected-checks policy is turned on when asked, and otherwise left at its default."""
    body = {"name": "guarded", "requireReceipt": require_receipt}
    project = server.owner.ok("POST", "/projects", body, expect=201)["project"]
    base = server.worktree()
    initial = base.commit({**checks_files(), GUARDED_MODULE: GUARD, "README.md": "hi\n"}, "import")
    base.push(project["cloneUrl"], server.owner_token)
    if protect_checks:
        wanted = {"protectChecks": True}
        policy = server.owner.ok("PUT", f"/projects/{project['id']}/policy", wanted)
        assert policy == {"policy": wanted}
    return Project(server, project["id"], project["cloneUrl"], base, initial)


@pytest.fixture
def required(server: Server) -> Project:
    return new_project(server, True)


@pytest.fixture
def advisory(server: Server) -> Project:
    return new_project(server, False)
