"""`forkhorse serve` as a real subprocess on a free port, with images from the test cache."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.fixtures import *  # noqa: F403
from tests.support.serve import ServeProcess, free_port


@pytest.fixture
def serve(
    tmp_path: Path,
    busybox_ref: str,
    default_ref: str,
) -> Iterator[Callable[..., ServeProcess]]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "images.json").write_text(json.dumps({"busybox": busybox_ref, "default": default_ref}))
    started: list[ServeProcess] = []

    def start(*args: str) -> ServeProcess:
        process = ServeProcess(home, started[0].port if started else free_port())
        process.start(*args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(signal.SIGKILL)
