"""Real podman fixtures for every suite: the podman CLI, the busybox and default images built
once into a stable directory shared by test sessions, a port per test, and `run_check`, which
runs one check through the whole lifecycle and proves nothing was left behind."""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import (
    ImageRegistry,
    build_busybox_image,
    build_default_image,
    image_present,
)
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.adapters.containers.podman_cli import Podman

from tests.integration.containers.helpers import (
    Attempt,
    RunCheck,
    containers_of,
    spec_for,
    wait_until_done,
)

# Images survive between test sessions here, so only the first session pays for the build.
IMAGE_HOME = Path(
    os.environ.get("FORKHORSE_TEST_IMAGE_HOME", Path.home() / ".cache/forkhorse/test-images")
)


@pytest.fixture(scope="session")
def podman() -> Podman:
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.fail("podman and runc are required: apt-get install podman runc")
    return Podman()


def _locked_build(
    name: str, build: Callable[[ImageRegistry], str], podman: Podman, *, reuse: bool = True
) -> str:
    """Build an image unless a previous session did (`reuse=False`: let `build` decide, as
    the default image's does from its inputs label); a file lock keeps sessions from racing."""
    IMAGE_HOME.mkdir(parents=True, exist_ok=True)
    registry = ImageRegistry(IMAGE_HOME)
    with (IMAGE_HOME / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = registry.entries().get(name)
        if reuse and known and image_present(podman, known):
            return known
        return build(registry)


@pytest.fixture(scope="session")
def busybox_ref(podman: Podman) -> str:
    return _locked_build("busybox", lambda registry: build_busybox_image(registry, podman), podman)


@pytest.fixture(scope="session")
def default_ref(podman: Podman) -> str:
    """The real default image (the pinned Node 24, Debian git, npm's release), about a minute
    the first time."""

    def build(registry: ImageRegistry) -> str:
        started = time.monotonic()
        reference = build_default_image(registry, podman, IMAGE_HOME / "cache")
        print(f"default image built in {time.monotonic() - started:.0f} s")
        return reference

    # Rebuilt when its recipe or pinned node changes (issue 30: Node 24), else reused.
    return _locked_build("default", build, podman, reuse=False)


@pytest.fixture
def port(tmp_path: Path, podman: Podman, busybox_ref: str) -> Iterator[PodmanContainerPort]:
    port = PodmanContainerPort(tmp_path / "state", ImageRegistry(IMAGE_HOME), podman)
    yield port
    # Whatever a test did, none of its containers may survive it.
    port.cleanup_orphans(frozenset())


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "src" / "main.js").write_text("console.log('hi')\n")
    return root


@pytest.fixture
def run_check(
    port: PodmanContainerPort, podman: Podman, busybox_ref: str, checkout: Path
) -> RunCheck:
    """Start, poll, collect and (always) destroy one check; assert no container is left."""

    def run(
        command: str, *, reference: str | None = None, source: Path | None = None, timeout: int = 30
    ) -> Attempt:
        spec = spec_for(reference or busybox_ref, command, source or checkout, timeout=timeout)
        started = time.monotonic()
        handle = port.start(spec)
        try:
            state = wait_until_done(port, handle)
            result = port.collect(handle)
        finally:
            port.destroy(handle)
        assert containers_of(podman, spec.execution) == []
        return Attempt(result, state, time.monotonic() - started)

    return run
