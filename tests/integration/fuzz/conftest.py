"""One live Forkhorse per fuzz module: waitress on 127.0.0.1, SQLite, disk git and real
bubblewrap quick checks. The fuzzers declare quick checks only, so no container starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from forkhorse.adapters.containers.images import ImageRegistry

from tests.support.live import Server, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("forkhorse")
    live, stop = start_server(home / "home", ImageRegistry(home / "images"))
    yield live
    stop()
