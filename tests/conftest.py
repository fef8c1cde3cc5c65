"""Fixtures shared across suites live in tests/support/ and are registered here, once; the
`podman` and `browser` markers follow from the fixtures a test uses, so they always match."""

import pytest

pytest_plugins = [
    "tests.support.containers",
    "tests.support.live",
    "tests.support.console",
    "tests.support.runner",
    "tests.support.gitserve",
    "tests.support.lambda_api",
    "tests.support.promote",
    "tests.support.api_world",
]

# A test that uses the fixture (even through another fixture) needs what the marker names.
MARKER_OF_FIXTURE = {"podman": "podman", "playwright": "browser"}


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            marker = MARKER_OF_FIXTURE.get(fixture)
            if marker and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
