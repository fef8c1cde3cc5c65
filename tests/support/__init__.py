"""Helpers and fixtures shared by test suites. Import helpers explicitly. The fixture modules
are gathered in tests/support/fixtures.py, which each layer that uses real adapters imports
into its conftest; tests/unit/service/conftest.py takes only the fast service tier."""
