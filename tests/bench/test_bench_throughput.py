"""Throughput: 20 reviews submitted at once through the HTTP API of a live local server, each
with 3 quick checks and 1 full check, against the same 80 checks run bare (a bubblewrap
Python start per quick check, a `podman run --rm` per full check) with the same parallelism,
in one run. The two alternate for `ROUNDS` rounds (new commits each round); the figure is the
ratio of their median wall times, and every round is printed, with receipts per minute.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
import requests
from forkhorse.wiring.settings import LocalSettings

from tests.bench.test_bench_runs import PODMAN_FLAGS
from tests.integration.runner.scenarios import BRAND, PASSING_QUICK, checks_file, full, quick
from tests.support.bench import BenchFigures
from tests.support.live import Lane, Server, new_lane, new_project

REVIEWS = 20
QUICK_PER_REVIEW = 3
ROUNDS = 5  # the machine is shared: one round of each side can land in another's burst
pytestmark = pytest.mark.bench

FILES = {
    "brand.json": BRAND,
    **{f".forkhorse/quick/q{index}.py": PASSING_QUICK for index in range(QUICK_PER_REVIEW)},
    ".forkhorse/checks": checks_file(
        *(quick(f"q{index}", f"q{index}") for index in range(QUICK_PER_REVIEW)),
        full("t", "true"),
    ),
}
BARE_PYTHON = (
    *("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
    *("--unshare-all", "--die-with-parent", "--new-session"),
    *(sys.executable, "-I", "-S", "-c", "pass"),
)


def _receipts_seconds(lanes: list[Lane], commits: list[str]) -> float:
    """Request every review at once, then wait for every receipt. The owner polls on one
    kept-alive connection, as a real client would: the bench's client shares the machine
    with the server, and a new connection per poll would cost it as much as a check."""
    project = lanes[0].project.id
    with requests.Session() as session:
        owner = replace(lanes[0].project.server.owner, session=session)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=REVIEWS) as pool:
            reviews = list(pool.map(Lane.request_review, lanes, commits))
        finished = [owner.wait_receipt(project, review["id"]) for review in reviews]
        elapsed = time.perf_counter() - started
    outcomes = {_status(review) for review in finished}
    assert outcomes == {"passed"}, outcomes
    return elapsed


def _status(review: dict[str, Any]) -> str:
    receipt = review["receipt"]
    return "no receipt" if receipt is None else str(receipt["status"])


def _bare_seconds(busybox_ref: str, parallelism: int) -> float:
    """The same 80 checks, bare, with the same parallelism."""
    podman = ("podman", "run", "--rm", *PODMAN_FLAGS, busybox_ref, "true")
    commands = [BARE_PYTHON] * (REVIEWS * QUICK_PER_REVIEW) + [podman] * REVIEWS
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallelism) as pool:
        list(
            pool.map(
                lambda command: subprocess.run(command, check=True, capture_output=True), commands
            )
        )
    return time.perf_counter() - started


def test_bench_twenty_reviews_at_once(
    server: Server, busybox_ref: str, bench_figures: BenchFigures
) -> None:
    concurrency = LocalSettings.from_environ().concurrency  # what the server runs with
    project = new_project(server, True)
    lanes = [new_lane(project, f"agent-{index}") for index in range(REVIEWS)]
    ours: list[float] = []
    bare: list[float] = []
    for round_ in range(ROUNDS):
        commits = [
            lane.push({**FILES, "README.md": f"lane {index}, round {round_}\n"})
            for index, lane in enumerate(lanes)
        ]
        ours.append(_receipts_seconds(lanes, commits))
        bare.append(_bare_seconds(busybox_ref, concurrency))
        print(
            f"\nround {round_ + 1}: {REVIEWS} reviews at once ({REVIEWS * (QUICK_PER_REVIEW + 1)}"
            f" checks, concurrency {concurrency}): {ours[-1]:.1f} s, "
            f"{REVIEWS / ours[-1] * 60:.0f} receipts per minute; the same checks bare: "
            f"{bare[-1]:.1f} s; ratio {ours[-1] / bare[-1]:.2f}x"
        )
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"medians: {statistics.median(ours):.1f} s against {statistics.median(bare):.1f} s;"
          f" ratio {ratio:.2f}x")  # fmt: skip
    bench_figures.record("throughput", ratio)
    assert ratio < 10.0, "a regression: the server costs far more than its checks"
