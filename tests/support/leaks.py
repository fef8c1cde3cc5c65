"""What a test session leaves behind: processes, containers and mounts that still refer to
its own temporary directory once every fixture has been torn down.

Everything a test starts lives under the session's basetemp (homes, checkouts, logs), so a
process whose command line, working directory or environment names it or that holds a file
open in it, a container that mounts from it, or a mount point inside it belongs to this
session and no other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

DEPLOYMENT_LABEL = "forkhorse.deployment"  # forkhorse.adapters.containers.common
SETTLE_SECONDS = 60.0  # a stopped server or removed container may take a moment to go
POLL_SECONDS = 0.2


def leftovers(basetemp: Path, containers: bool = True) -> list[str]:
    """What still refers to `basetemp`; containers only if asked (podman is slow to ask)."""
    root = str(basetemp.resolve()) + os.sep
    found = [*_processes(root), *_mounts(root)]
    return [*found, *_containers(root)] if containers else found


def settled_leftovers(
    basetemp: Path, containers: bool = True, timeout: float = SETTLE_SECONDS
) -> list[str]:
    """The leftovers that remain once they have had `timeout` seconds to go away."""
    return _settled(lambda: leftovers(basetemp, containers), timeout)


def _settled(find: Callable[[], list[str]], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    found = find()
    while found and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        found = find()
    return found


def _processes(root: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if any(root in text for text in _process_texts(entry)):
            command = _read(entry / "cmdline").replace("\0", " ").strip()
            found.append(f"process {entry.name}: {command[:200]}")
    return found


def _process_texts(entry: Path) -> list[str]:
    links = [entry / "cwd", *_entries(entry / "fd")]
    return [_read(entry / "cmdline"), _read(entry / "environ"), *map(_target, links)]


def _entries(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:
        return []


def _target(link: Path) -> str:
    try:
        return os.readlink(link) + os.sep
    except OSError:
        return ""


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:  # gone, or not ours to read
        return ""


def _containers(root: str) -> list[str]:
    if shutil.which("podman") is None:
        return []
    listed = _podman("ps", "--all", "--quiet", "--filter", f"label={DEPLOYMENT_LABEL}")
    ids = listed.split()
    if not ids:
        return []
    sources = _podman("inspect", "--format", "{{.Id}} {{range .Mounts}}{{.Source}} {{end}}", *ids)
    return [
        f"container {line.split()[0][:12]}"
        for line in sources.splitlines()
        if any(source.startswith(root) for source in line.split()[1:])
    ]


def _podman(*args: str) -> str:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
    return done.stdout  # a container removed between ps and inspect is simply not listed


def _mounts(root: str) -> list[str]:
    found = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        point = line.split()[4] + os.sep
        if point.startswith(root):
            found.append(f"mount {point}")
    return found
