"""Fixtures shared across suites live in tests/support/ and are registered here, once."""

pytest_plugins = [
    "tests.support.containers",
    "tests.support.live",
    "tests.support.console",
]
