"""A Forkhorse process that starts one long receipt run and then waits to be killed.

Usage: python -m tests.integration.runner.crash_worker HOME IMAGES_DIR
It prints the run's JSON once the full check's container is running.
"""

import json
import sys
import time
from pathlib import Path

from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.wiring.local import build_local_runtime

from tests.integration.runner.scenarios import checks_file, full
from tests.support.runner import CountingContainers, World, seed_project


def main() -> None:
    home, images = Path(sys.argv[1]), Path(sys.argv[2])
    registry = ImageRegistry(images)
    containers = CountingContainers(home, registry)
    runtime = build_local_runtime(home, images=registry, containers=containers)
    seed_project(runtime)
    world = World(runtime, containers)
    run = world.review({".forkhorse/checks": checks_file(full("long", "sleep 120"))})
    runtime.supervisor.start_run(run)
    while not containers.started:
        time.sleep(0.05)
    time.sleep(1)  # let podman report it running
    print(json.dumps(run.model_dump(mode="json")), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
