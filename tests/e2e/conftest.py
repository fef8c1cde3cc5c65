"""`forkhorse serve` as a real subprocess on a free port, with images from the test cache."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from tests.integration.containers.conftest import (  # noqa: F401
    busybox_ref,
    default_ref,
    podman,
)

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServeProcess:
    def __init__(self, home: Path, port: int) -> None:
        self.home, self.port = home, port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = home.parent / f"serve-{port}.log"

    def start(self, *args: str) -> None:
        env = {**os.environ, "FORKHORSE_HOME": str(self.home), "FORKHORSE_PORT": str(self.port)}
        command = [sys.executable, "-m", "forkhorse.cli", "serve", *args]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/openapi.json", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                time.sleep(0.1)
        raise AssertionError(f"serve did not start:\n{self.log.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)
        self.process = None


@pytest.fixture
def serve(
    tmp_path: Path,
    busybox_ref: str,  # noqa: F811
    default_ref: str,  # noqa: F811
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
