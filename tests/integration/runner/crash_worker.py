"""A Forkhorse process that starts one long receipt run and then waits to be killed.

`start_long_run` is the worker, forked by tests/support/forked.py; it sends the run's JSON
once podman lists the full check's container.
"""

import time
from multiprocessing.connection import Connection
from pathlib import Path

from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.wiring.local import build_local_runtime

from tests.integration.containers.helpers import containers_of
from tests.integration.runner.scenarios import checks_file, full
from tests.support.runner import CountingContainers, World, seed_project

RUNNING_SECONDS = 120.0


def start_long_run(messages: Connection, home: Path, images: Path) -> None:
    registry = ImageRegistry(images)
    containers = CountingContainers(home, registry)
    runtime = build_local_runtime(home, images=registry, containers=containers)
    seed_project(runtime)
    world = World(runtime, containers)
    run = world.review({".forkhorse/checks": checks_file(full("long", "sleep 120"))})
    runtime.supervisor.start_run(run)
    deadline = time.monotonic() + RUNNING_SECONDS
    while not containers_of(Podman(), run.generation):
        assert time.monotonic() < deadline, "the check's container never started"
        time.sleep(0.05)
    messages.send(run.model_dump(mode="json"))
    time.sleep(600)  # until the test kills it
