"""Quick-sandbox fixtures: real git repositories read through the real disk snapshot reader,
and a real bubblewrap sandbox (the helpers are in tests/support/sandbox.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox

from tests.support.sandbox import (
    JS_MODULE,
    MODULE,
    Committed,
    RunModule,
    make_committer,
    module_runner,
)


@pytest.fixture
def loopback_listener() -> Iterator[tuple[int, list[object]]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def commit_files(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Committed]:
    return make_committer(tmp_path)


@pytest.fixture(scope="session")
def sandbox() -> BwrapSandbox:
    return BwrapSandbox()  # fails loudly when bubblewrap is missing


@pytest.fixture
def run_module(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> RunModule:
    """Commit `source` as the quick module (plus `files`) and run it in a fresh sandbox."""
    return module_runner(sandbox, commit_files, MODULE)


@pytest.fixture
def run_js(
    sandbox: BwrapSandbox, commit_files: Callable[[dict[str, str | bytes]], Committed]
) -> RunModule:
    """Commit `source` as a JavaScript quick module (plus `files`) and run it."""
    return module_runner(sandbox, commit_files, JS_MODULE)
