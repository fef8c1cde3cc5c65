"""Container benchmarks: a full check against a bare `podman run --rm <image> true`, and the
default image's build from scratch. Ratios are measured in the same run."""

from __future__ import annotations

import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from forkhorse.adapters.containers.images import (
    DEFAULT_IMAGE,
    ImageRegistry,
    build_busybox_image,
    build_default_image,
    default_image_inputs,
    find_built,
    user_cache_dir,
)
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman
from forkhorse.ports.containers import ContainerSpec

from tests.support.bench import BenchFigures

pytestmark = pytest.mark.bench
RUNS = 7
TARGET_RATIO = 1.5


def _median_seconds(action: Callable[[], object]) -> float:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _full_check(port: PodmanContainerPort, reference: str, checkout: Path) -> None:
    spec = ContainerSpec("bench", str(uuid.uuid4()), "g", "true", reference, "true", 60, checkout)
    handle = port.start(spec)
    try:
        while port.poll(handle) == "running":
            time.sleep(0.005)
        assert port.collect(handle).outcome == "passed"
    finally:
        port.destroy(handle)


def test_full_check_overhead_against_a_bare_podman_run(tmp_path: Path) -> None:
    podman = Podman()
    reference = build_busybox_image(ImageRegistry(tmp_path / "images"), podman)
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    for index in range(50):
        (checkout / "src" / f"file{index}.js").write_text("console.log(1)\n" * 20)
    port = PodmanContainerPort(tmp_path / "state", ImageRegistry(tmp_path / "images"), podman)
    bare_command = podman.command("run", "--rm", *ULIMIT_FLAGS, reference, "true")

    def bare() -> None:
        subprocess.run(bare_command, check=True, capture_output=True)

    bare(), _full_check(port, reference, checkout)  # warm both paths
    bare_seconds = _median_seconds(bare)
    ours = _median_seconds(lambda: _full_check(port, reference, checkout))
    ratio = ours / bare_seconds
    print(
        f"\n[bench] full check (podman run --rm, wait, collect, confirmed cleanup): "
        f"{ours * 1000:.0f} ms; bare podman run --rm true {bare_seconds * 1000:.0f} ms; "
        f"ratio {ratio:.2f}x (target <= {TARGET_RATIO}x)"
    )
    assert ratio <= TARGET_RATIO


@pytest.mark.timeout(1800)  # up to three builds, the first with a cold package cache
def test_building_the_default_image(tmp_path: Path, bench_figures: BenchFigures) -> None:
    """A rebuild with the per-user package cache warm, then a build that finds the identical
    image by its inputs label; a rebuild must give the digest the image already had."""
    podman, cache = Podman(), user_cache_dir()
    registry = ImageRegistry(tmp_path)
    earlier = find_built(podman, DEFAULT_IMAGE, default_image_inputs())
    if earlier is None or not any((cache / "apt-archives").glob("*.deb")):
        earlier = build_default_image(registry, podman, cache, progress=lambda _: None)
    started = time.perf_counter()
    rebuilt = build_default_image(registry, podman, cache, progress=print, rebuild=True)
    warm = time.perf_counter() - started
    started = time.perf_counter()
    reused = build_default_image(registry, podman, cache, progress=print)
    reuse = time.perf_counter() - started
    bench_figures.record("image-warm", warm)
    bench_figures.record("image-reuse", reuse)
    print(
        f"\n[bench] default image, warm package cache: {warm:.0f} s -> {rebuilt}"
        f"\n[bench] the same inputs again: {reuse:.1f} s (reused)"
        f"\n[bench] rebuild reproduces the earlier digest: {rebuilt == earlier} ({earlier})"
    )
    assert reused == rebuilt
    assert rebuilt == earlier, "the same inputs must give the same digest"
