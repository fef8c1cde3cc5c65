"""This layer's shared fixtures (tests/support/fixtures.py)."""

from tests.support.fixtures import *  # noqa: F403
