"""Benchmarks record their figures through `bench_figures`; the run ends with one
table of every figure, its target and whether it meets it."""

import pytest

from tests.support.bench import BenchFigures
from tests.support.fixtures import *  # noqa: F403

_RUN = BenchFigures()


@pytest.fixture
def bench_figures() -> BenchFigures:
    return _RUN


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RUN.measured:
        return  # no benchmark that records a figure ran
    terminalreporter.section("make bench figures, measured in this run")
    for line in _RUN.table():
        terminalreporter.write_line(line)
