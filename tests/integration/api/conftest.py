"""One live Forkhorse per test module: waitress on 127.0.0.1, SQLite, disk git, real
bubblewrap quick checks and real podman full checks on the busybox test image."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from forkhorse.adapters.containers.images import ImageRegistry

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


@pytest.fixture
def required(server: Server) -> Project:
    return new_project(server, True)


@pytest.fixture
def advisory(server: Server) -> Project:
    return new_project(server, False)
