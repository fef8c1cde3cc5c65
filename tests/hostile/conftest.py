"""This layer's shared fixtures (tests/support/fixtures.py), and the scheduler's fake
steps (tests/support/fake_steps.py)."""

from tests.support.fake_steps import fake  # noqa: F401
from tests.support.fixtures import *  # noqa: F403
