"""Helpers shared by test suites (not fixtures: import them explicitly)."""
