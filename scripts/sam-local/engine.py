"""A Docker API for SAM: `podman system service` on a unix socket, stopped by its own PID."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONTAINERS_CONF = HERE / "containers.conf"
START_TIMEOUT = 30.0


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(self.path))


def _answers(sock: Path) -> bool:
    connection = _UnixConnection(sock)
    try:
        connection.request("GET", "/_ping")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def engine_environment() -> dict[str, str]:
    """podman's settings for everything this run starts (runc, the allowed ulimits)."""
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


@contextmanager
def docker_api(state_dir: Path) -> Iterator[str]:
    """Serve the Docker API until the block ends; yields the DOCKER_HOST value."""
    sock = state_dir / "podman.sock"
    sock.unlink(missing_ok=True)
    log = (state_dir / "podman-service.log").open("wb")
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        env=engine_environment(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    print(f"sam-local: podman system service, PID {service.pid}, on {sock}", flush=True)
    try:
        _wait_until_answering(service, sock)
        yield f"unix://{sock}"
    finally:
        stop_process(service)
        log.close()
        sock.unlink(missing_ok=True)


def _wait_until_answering(service: subprocess.Popen[bytes], sock: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not (sock.exists() and _answers(sock)):
        if service.poll() is not None:
            raise SystemExit(f"podman system service exited with {service.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit("podman system service did not answer within 30 s")
        time.sleep(0.1)


def stop_process(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM this one process (by its PID), then SIGKILL it if it lingers."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
