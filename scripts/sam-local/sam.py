"""The SAM CLI from the tools venv, pointed at the local Docker API, never at a registry."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aws_local import FAKE_CREDENTIALS
from engine import stop_process

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SAM = ROOT / ".tools/bin/sam"
# The template's parameters: placeholders that only shape the functions' environment.
PARAMETERS = (
    "DefaultImageReference=sam-local.invalid/forkhorse/default@sha256:" + "0" * 64,
    "PublicUrl=https://sam-local.invalid",
    "OwnerCallbackUrl=https://sam-local.invalid/",
)
# SAM passes a function only the variables that its template declares.
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"


def _python313_dir() -> str:
    """`sam build` needs python3.13 on PATH: the same installation that the image carries."""
    return str(Path(sys.base_prefix) / "bin")


@dataclass
class Sam:
    build_dir: Path
    docker_host: str = ""
    env_vars: Path | None = None
    timings: dict[str, list[float]] = field(default_factory=dict)

    @property
    def template(self) -> Path:
        return self.build_dir / "template.yaml"

    def environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key != ENDPOINT_VARIABLE}
        env.update(FAKE_CREDENTIALS)  # never anyone's real credentials
        env.update(
            SAM_CLI_TELEMETRY="0",
            SAM_CLI_CONTAINER_CONNECTION_TIMEOUT="60",
            PATH=f"{_python313_dir()}:{env['PATH']}",
        )
        if self.docker_host:
            env["DOCKER_HOST"] = self.docker_host
        return env

    def build(self, cache_dir: Path) -> None:
        started = time.monotonic()
        subprocess.run(
            [str(SAM), "build", "--template", str(ROOT / "template.yaml"),
             "--build-dir", str(self.build_dir), "--cached", "--cache-dir", str(cache_dir),
             "--parameter-overrides", *PARAMETERS],
            cwd=ROOT, env=self.environment(), check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        declare_endpoint_variable(self.template)
        print(f"sam-local: sam build in {time.monotonic() - started:.1f} s", flush=True)

    def local_args(self) -> list[str]:
        assert self.env_vars is not None
        return [
            "--template", str(self.template), "--env-vars", str(self.env_vars),
            "--parameter-overrides", *PARAMETERS,
            "--skip-pull-image", "--docker-network", "host",
        ]  # fmt: skip

    def invoke(self, function: str, event: Path, raises: str | None = None) -> dict[str, Any]:
        """`sam local invoke` one function with one event; its JSON response. A function
        error is a failure, unless it is the one expected (`raises`), whose payload is
        then the response."""
        started = time.monotonic()
        completed = subprocess.run(
            [str(SAM), "local", "invoke", function, "--event", str(event), *self.local_args()],
            cwd=ROOT, env=self.environment(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        self.timings.setdefault(function, []).append(time.monotonic() - started)
        output = completed.stdout.strip().splitlines()
        if completed.returncode != 0 or not output:
            raise AssertionError(
                f"sam local invoke {function} exited {completed.returncode}:\n"
                f"{completed.stderr[-4000:]}"
            )
        response: dict[str, Any] = json.loads(output[-1])
        if response.get("errorType") != raises:
            raise AssertionError(
                f"{function} raised {response.get('errorType')} (expected {raises}): "
                f"{response.get('errorMessage')}\n"
                f"{completed.stderr[-4000:]}"
            )
        return response

    def invoke_with(
        self, function: str, event: dict[str, Any], raises: str | None = None
    ) -> dict[str, Any]:
        """Invoke with an event made here, as Step Functions would pass it on."""
        path = self.build_dir.parent / "events" / f"{function}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(event), encoding="utf-8")
        return self.invoke(function, path, raises)

    @contextmanager
    def start_api(self, port: int) -> Iterator[str]:
        """`sam local start-api` on loopback until the block ends; stopped by its PID."""
        log = (self.build_dir.parent / "start-api.log").open("wb")
        server = subprocess.Popen(
            [str(SAM), "local", "start-api", "--host", "127.0.0.1", "--port", str(port),
             "--warm-containers", "LAZY", *self.local_args()],
            cwd=ROOT, env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        print(f"sam-local: sam local start-api, PID {server.pid}, on 127.0.0.1:{port}", flush=True)
        try:
            _wait_for_port(server, port)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(server, grace=30)
            log.close()


def _wait_for_port(server: subprocess.Popen[bytes], port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"sam local start-api did not start (exit {server.poll()})")
        time.sleep(0.2)


def declare_endpoint_variable(template: Path) -> None:
    """Declare AWS_ENDPOINT_URL (empty) on every function of the built template.

    Empty, boto3 keeps AWS's endpoints; `--env-vars` can then point the functions at moto.
    Only the build output changes; the source template stays as it is deployed.
    """
    document = yaml.safe_load(template.read_text(encoding="utf-8"))
    variables = document["Globals"]["Function"].setdefault("Environment", {})
    variables.setdefault("Variables", {}).setdefault(ENDPOINT_VARIABLE, "")
    template.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def write_env_vars(path: Path, endpoint: str) -> Path:
    document = json.loads((HERE / "env-vars.json").read_text(encoding="utf-8"))
    document["Parameters"][ENDPOINT_VARIABLE] = endpoint
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path
