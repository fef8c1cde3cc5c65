"""What every session shares: the `podman`, `browser` and `sandbox` markers, which follow from
the fixtures a test uses so they always match; `serial` from the module; the xdist
scheduler (tests/support/parallel.py); and the check that a session leaves nothing behind.

Shared fixtures are not registered here: each layer's conftest imports those it uses
(tests/support/fixtures.py), so a unit session starts without moto, playwright or podman."""

from collections.abc import Iterator

import pytest

from tests.support.leaks import settled_leftovers

pytest_plugins = ["tests.support.parallel"]

# A test that uses the fixture (even through another fixture) needs what the marker names.
# `server` and `world` run real quick checks, in bubblewrap.
MARKER_OF_FIXTURE = {
    "podman": "podman",
    "playwright": "browser",
    "sandbox": "sandbox",
    "server": "sandbox",
    "world": "sandbox",
}

# Modules that push a sandbox or container to a resource limit and tell the outcome apart by
# which limit fired first (deadline against memory, CPU against wall time). Contention from
# parallel workers can change which fires, so `make test` runs them alone after the rest.
SERIAL_MODULES = (
    "tests/hostile/test_sandbox_limits.py",
    "tests/integration/containers/test_podman_hostile.py",
    "tests/integration/containers/test_podman_lifecycle.py",
    "tests/integration/sandbox/test_quick_hostile.py",
    "tests/integration/sandbox/test_quick_hostile_js.py",
    "tests/integration/sandbox/test_quick_sandbox.py",
)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SERIAL_MODULES):
            item.add_marker("serial")
        for fixture in getattr(item, "fixturenames", ()):
            marker = MARKER_OF_FIXTURE.get(fixture)
            if marker and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Torn down last: no process, container or mount of this session may outlive it.
    Containers are looked for when a collected test can start one (the `podman` marker)."""
    basetemp = tmp_path_factory.getbasetemp()
    yield
    podman = any(item.get_closest_marker("podman") for item in request.session.items)
    left = settled_leftovers(basetemp, containers=podman)
    assert not left, "the session left behind:\n" + "\n".join(left)
