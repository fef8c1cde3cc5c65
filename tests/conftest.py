"""Fixtures shared across suites live in tests/support/ and are registered here, once; the
`podman` and `browser` markers follow from the fixtures a test uses, so they always match;
`serial` from the module."""

import pytest

pytest_plugins = [
    "tests.support.containers",
    "tests.support.live",
    "tests.support.console",
    "tests.support.runner",
    "tests.support.gitserve",
    "tests.support.lambda_api",
    "tests.support.promote",
    "tests.support.service",
    "tests.support.parallel",
    "tests.support.api_world",
]

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
