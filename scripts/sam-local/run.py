"""`make sam-local`: the real Lambda packaging, invoked in Lambda-like containers, offline.

1. the local Lambda base image (built once, then cached);
2. `sam build`;
3. the Docker API (podman system service) and moto_server, both stopped on the way out;
4. `sam local start-lambda` on loopback, each function's container kept warm: every function
   invoked with its sample event through boto3's Lambda client, asserting the responses;
5. `sam local start-api` on loopback, walking the API scenario (its state machine steps go
   through the same start-lambda);
6. no container of the run is left once both servers have stopped.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import aws_local
import invokes
import walk
from base_image import KEY_LABEL, ensure_base_image, image_size
from engine import docker_api
from forkhorse.adapters.containers.podman_cli import Podman
from sam import Sam, write_env_vars

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".aws-sam/sam-local"


def main() -> int:
    started = time.monotonic()
    STATE.mkdir(parents=True, exist_ok=True)
    podman = Podman()
    ensure_base_image(podman, STATE)
    print(f"sam-local: base image {int(image_size(podman)) / 1e6:.0f} MB", flush=True)
    sam = Sam(STATE / "build")
    sam.build(STATE / "build-cache")
    try:
        api_timings = exercise(sam, podman)
    finally:
        left = leftover_containers(podman)
        prune_superseded_images(podman)
    if left:
        raise SystemExit(f"sam-local: containers left behind: {left}")
    report(sam)
    print(
        f"sam-local: ApiFunction under start-api: cold {api_timings['cold']:.2f} s, "
        f"warm {api_timings['warm']:.3f} s (median of 10)",
        flush=True,
    )
    print(f"sam-local: passed in {time.monotonic() - started:.0f} s", flush=True)
    return 0


def exercise(sam: Sam, podman: Podman) -> dict[str, float]:
    with docker_api(STATE) as docker_host, aws_local.moto_server(podman) as moto:
        aws_local.use_endpoint(moto)
        aws_local.create_resources()
        sam.docker_host = docker_host
        sam.env_vars = write_env_vars(STATE / "env-vars.json", moto.container_url)
        with sam.start_lambda(aws_local.free_loopback_port()):
            invokes.invoke_every_function(sam)
            return walk.walk(sam)


def leftover_containers(podman: Podman) -> list[str]:
    """Containers of the Lambda images (they inherit the base image's label), removed so
    the next run starts clean, and named so this run fails."""
    listed = podman.output("ps", "--all", "--quiet", "--filter", f"label={KEY_LABEL}").split()
    if listed:
        podman.run("rm", "--force", "--time", "0", *listed)
    return listed


def prune_superseded_images(podman: Podman) -> None:
    """SAM rebuilds its per-function image on every invoke; drop the untagged leftovers
    (only images derived from the local base image carry its label)."""
    podman.run("image", "prune", "--force", "--filter", f"label={KEY_LABEL}")


def report(sam: Sam) -> None:
    for function, seconds in sorted(sam.timings.items()):
        shown = ", ".join(f"{value:.1f} s" for value in seconds)
        print(f"sam-local: invoke {function}: {shown}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
