"""`forkhorse serve` as a real subprocess on a loopback port: started, waited for, and stopped
by signal (SIGKILL is a crash). Shared by the e2e tests and the soak driver."""

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

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
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
