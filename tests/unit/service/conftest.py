"""The fast service tier (tests/support/service.py): the only shared fixture unit tests use."""

from tests.support.service import fast

__all__ = ["fast"]
