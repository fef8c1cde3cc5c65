"""Console page loads in Debian's Chromium: the median navigation timings and the slowest
`forkhorse:ready` mark of the projects and project pages, reported against a one-second
budget (a figure, not an assertion: wall-clock speed depends on the machine's load)."""

from __future__ import annotations

import statistics

import pytest

from tests.support.console import Console, write_artifact
from tests.support.live import Server, new_project

LOAD_RUNS = 7
BUDGET_MS = 1000.0
pytestmark = [pytest.mark.bench, pytest.mark.browser, pytest.mark.podman]


def _load(console: Console, route: str) -> dict[str, float]:
    console.page.goto("about:blank")
    console.page.goto(f"{console.url}/{route}")
    console.wait_ready()
    timings: dict[str, float] = console.page.evaluate(
        """() => {
          const navigation = performance.getEntriesByType('navigation')[0];
          return {
            domContentLoaded: navigation.domContentLoadedEventEnd,
            load: navigation.loadEventEnd,
            ready: performance.getEntriesByName('forkhorse:ready')[0].startTime,
          };
        }"""
    )
    return timings


def test_console_page_load_times(console: Console, server: Server) -> None:
    project = new_project(server, True)
    console.sign_in()
    figures: dict[str, dict[str, float]] = {}
    for name, route in (("projects", "#/"), ("project", f"#/p/{project.id}")):
        runs = [_load(console, route) for _ in range(LOAD_RUNS)]
        figures[name] = {
            key: round(statistics.median(run[key] for run in runs), 1) for key in runs[0]
        }
        figures[name]["readyMax"] = round(max(run["ready"] for run in runs), 1)
    write_artifact("load-times.json", figures)
    print(f"console load times, median of {LOAD_RUNS} (ms): {figures}")
    for name, numbers in figures.items():
        share = numbers["readyMax"] / BUDGET_MS
        print(f"{name}: slowest ready {numbers['readyMax']} ms, {share:.2f} of the budget")
