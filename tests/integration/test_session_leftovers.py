"""The end-of-session check (tests/conftest.py) sees what a test leaves behind: a process
that names the session's directory in its command line, environment or working directory, or
holds a file open in it, a mount inside it, and a container that mounts from it; and
nothing once they are gone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from forkhorse.adapters.containers.common import DEPLOYMENT_LABEL as PRODUCT_LABEL
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS

from tests.support.leaks import DEPLOYMENT_LABEL, leftovers

SLEEP = "import time; time.sleep(600)"  # one process, whatever its arguments


@pytest.fixture
def sleeper() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


@pytest.mark.parametrize("where", ["cmdline", "environ", "cwd", "open file"])
def test_a_process_that_names_the_directory_is_left_until_it_ends(
    tmp_path: Path, sleeper: list[subprocess.Popen[bytes]], where: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    argv = [sys.executable, "-c", SLEEP, str(home) if where == "cmdline" else "-"]
    env = {"FORKHORSE_HOME": str(home)} if where == "environ" else {}
    with (home / "open.log").open("wb") as log:
        output = log if where == "open file" else None
        cwd = home if where == "cwd" else None
        sleeper.append(subprocess.Popen(argv, env=env, cwd=cwd, stdout=output))
    [found] = leftovers(tmp_path, containers=False)
    assert found.startswith(f"process {sleeper[0].pid}:")
    sleeper[0].kill()
    sleeper[0].wait()
    assert leftovers(tmp_path, containers=False) == []


def test_another_directory_with_the_same_prefix_is_not_ours(
    tmp_path: Path, sleeper: list[subprocess.Popen[bytes]]
) -> None:
    sibling = tmp_path.parent / (tmp_path.name + "0")
    sibling.mkdir()
    sleeper.append(subprocess.Popen([sys.executable, "-c", SLEEP, str(sibling)]))
    assert leftovers(tmp_path, containers=False) == []


def test_a_mount_inside_the_directory_is_left_until_unmounted(tmp_path: Path) -> None:
    point = tmp_path / "mnt"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "leak", str(point)], check=True)
    try:
        assert leftovers(tmp_path, containers=False) == [f"mount {point}/"]
    finally:
        subprocess.run(["umount", str(point)], check=True)
    assert leftovers(tmp_path, containers=False) == []


def test_a_container_mounting_from_the_directory_is_left_until_removed(
    tmp_path: Path, busybox_ref: str
) -> None:
    assert DEPLOYMENT_LABEL == PRODUCT_LABEL
    (tmp_path / "checkout").mkdir()
    container = subprocess.run(
        ["podman", "run", "-d", "--pull", "never", "--network", "none", *ULIMIT_FLAGS,
         "--label", f"{DEPLOYMENT_LABEL}=leak-test", "--volume", f"{tmp_path / 'checkout'}:/w:ro",
         busybox_ref, "sleep", "600"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        assert leftovers(tmp_path) == [f"container {container[:12]}"]
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "0", container], check=True)
    assert leftovers(tmp_path) == []
