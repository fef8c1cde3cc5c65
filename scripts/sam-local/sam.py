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

import boto3
import yaml
from aws_local import FAKE_CREDENTIALS
from botocore.config import Config
from engine import stop_process

from tests.support.aws import load_template

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
INVOKE_TIMEOUT = 300  # a cold container on a loaded machine; no invoke retries
# The deployed functions and layers are arm64; this machine emulates no arm64, so `sam local`
# builds and runs an x86_64 copy of the template (layers/node/Makefile reads the variable).
LOCAL_ARCHITECTURE = "x86_64"
ARCHITECTURE_VARIABLE = "NODE_LAYER_ARCHITECTURE"
CODE_PATHS = ("CodeUri", "ContentUri", "DefinitionUri")


def _python313_dir() -> str:
    """`sam build` needs python3.13 on PATH: the same installation that the image carries."""
    return str(Path(sys.base_prefix) / "bin")


@dataclass
class Sam:
    build_dir: Path
    docker_host: str = ""
    env_vars: Path | None = None
    timings: dict[str, list[float]] = field(default_factory=dict)
    lambda_client: Any = None  # set inside start_lambda()

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
        source = write_local_template(self.build_dir.parent / f"template.{LOCAL_ARCHITECTURE}.yaml")
        subprocess.run(
            [str(SAM), "build", "--template", str(source),
             "--build-dir", str(self.build_dir), "--cached", "--cache-dir", str(cache_dir),
             "--parameter-overrides", *PARAMETERS],
            cwd=ROOT, env={**self.environment(), ARCHITECTURE_VARIABLE: LOCAL_ARCHITECTURE},
            check=True, stdout=subprocess.DEVNULL,
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
        """Invoke one function with a sample event file; see `invoke_with`."""
        return self.invoke_with(function, json.loads(event.read_text(encoding="utf-8")), raises)

    def invoke_with(
        self, function: str, event: dict[str, Any], raises: str | None = None
    ) -> dict[str, Any]:
        """Invoke one function through `sam local start-lambda`; its JSON response. A
        function error is a failure, unless it is the one expected (`raises`), whose payload
        is then the response."""
        assert self.lambda_client is not None, "invoke inside start_lambda()"
        started = time.monotonic()
        answer = self.lambda_client.invoke(FunctionName=function, Payload=json.dumps(event))
        self.timings.setdefault(function, []).append(time.monotonic() - started)
        response: dict[str, Any] = json.loads(answer["Payload"].read() or b"null")
        if response.get("errorType") != raises:
            raise AssertionError(
                f"{function} raised {response.get('errorType')} (expected {raises}): "
                f"{response.get('errorMessage')}\n{self._log_tail('start-lambda')}"
            )
        return response

    @contextmanager
    def start_lambda(self, port: int) -> Iterator[None]:
        """`sam local start-lambda` on loopback, each function's container kept warm
        between invokes, until the block ends."""
        with self._serve("start-lambda", port) as url:
            self.lambda_client = boto3.client(
                "lambda", endpoint_url=url, region_name="us-east-1",
                aws_access_key_id="sam-local", aws_secret_access_key="sam-local",  # noqa: S106
                config=Config(read_timeout=INVOKE_TIMEOUT, retries={"max_attempts": 0}),
            )  # fmt: skip
            try:
                yield
            finally:
                self.lambda_client = None

    @contextmanager
    def start_api(self, port: int) -> Iterator[str]:
        """`sam local start-api` on loopback until the block ends."""
        with self._serve("start-api", port) as url:
            yield url

    @contextmanager
    def _serve(self, command: str, port: int) -> Iterator[str]:
        """One `sam local` server whose containers start on a function's first invoke and
        stay warm for the next (EAGER, all at start, measured no faster: the image builds
        contend); stopped by its PID, which removes its containers."""
        log = self._log(command).open("wb")
        server = subprocess.Popen(
            [str(SAM), "local", command, "--host", "127.0.0.1", "--port", str(port),
             "--warm-containers", "LAZY", *self.local_args()],
            cwd=ROOT, env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        print(f"sam-local: sam local {command}, PID {server.pid}, on 127.0.0.1:{port}", flush=True)
        try:
            _wait_for_port(server, port, command)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(server, grace=30)
            log.close()

    def _log(self, command: str) -> Path:
        return self.build_dir.parent / f"{command}.log"

    def _log_tail(self, command: str) -> str:
        return self._log(command).read_text(errors="replace")[-4000:]


def _wait_for_port(
    server: subprocess.Popen[bytes], port: int, command: str, timeout: float = 120
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"sam local {command} did not start (exit {server.poll()})")
        time.sleep(0.2)


def write_local_template(path: Path) -> Path:
    """template.yaml with every architecture LOCAL_ARCHITECTURE and its code paths absolute
    (the copy lives elsewhere), written to `path`; template.yaml stays as it is deployed."""
    path.write_text(yaml.safe_dump(_localized(load_template()), sort_keys=False), "utf-8")
    return path


def _localized(node: Any) -> Any:
    if isinstance(node, list):
        return [_localized(item) for item in node]
    if not isinstance(node, dict):
        return node
    localized: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("Architectures", "CompatibleArchitectures"):
            localized[key] = [LOCAL_ARCHITECTURE]
        elif key == "BuildArchitecture":
            localized[key] = LOCAL_ARCHITECTURE
        elif key in CODE_PATHS and isinstance(value, str):
            localized[key] = str(ROOT / value)
        else:
            localized[key] = _localized(value)
    return localized


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
