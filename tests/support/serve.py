"""`forkhorse serve` as a real subprocess on a loopback port: started, waited for, and stopped
by signal (SIGKILL is a crash). Shared by the e2e tests and the soak driver.

Readiness is an answer to GET /openapi.json within a generous overall deadline: on a loaded
machine the first request can take seconds, so no single attempt has a short read timeout.
A server that does not come up is killed before the error is raised, so a failed start
never leaves a process behind.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import requests

START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
POLL_SECONDS = 0.1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_serving(
    process: subprocess.Popen[bytes], url: str, log: Path, timeout: float = START_TIMEOUT
) -> None:
    """Return once `url` answers /openapi.json with 200; otherwise kill `process` and fail
    with its log (it exited, or the deadline passed)."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            answer = requests.get(
                url + "/openapi.json", timeout=max(deadline - time.monotonic(), 1)
            )
            if answer.status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(POLL_SECONDS)
    exited = process.poll()
    stop_process(process, signal.SIGKILL)
    reason = f"exited with {exited}" if exited is not None else f"not serving after {timeout:.0f} s"
    raise AssertionError(f"serve at {url} {reason}:\n{log.read_text(errors='replace')[-8000:]}")


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Signal `process` and reap it; one that outlives STOP_TIMEOUT is killed."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ServeProcess:
    def __init__(self, home: Path, port: int, env: Mapping[str, str] | None = None) -> None:
        self.home, self.port = home, port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = home.parent / f"serve-{port}.log"
        self._env = dict(env or {})

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self, *args: str) -> None:
        env = {
            **os.environ,
            **self._env,
            "FORKHORSE_HOME": str(self.home),
            "FORKHORSE_PORT": str(self.port),
        }
        command = [sys.executable, "-m", "forkhorse.cli", "serve", *args]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        try:
            wait_until_serving(self.process, self.url, self.log)
        except AssertionError:
            self.process = None
            raise

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None:
            stop_process(self.process, sig)
        self.process = None
