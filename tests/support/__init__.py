"""Helpers and fixtures shared by test suites. Import helpers explicitly; the fixture modules
are registered once, by `pytest_plugins` in tests/conftest.py, so never import a fixture."""
