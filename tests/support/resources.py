"""Measure what an attack costs the host: memory, shared memory, disk, processes.

Read from /proc and statvfs so a hostile test asserts a ceiling on what was really spent,
not on what the code under test claims. Ceilings that depend on the machine are asserted
as growth over an idle baseline measured in the same test.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1024 * 1024


def _status_value(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of a process (this one by default)."""
    return _status_value(pid or os.getpid(), "VmRSS") * 1024


def thread_count(pid: int) -> int:
    return _status_value(pid, "Threads")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _parents() -> dict[int, int]:
    """Every live process's parent, read from /proc (processes may vanish while read)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces or parentheses: fields start after the last ')'.
        parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def descendants(pid: int) -> set[int]:
    """The children of a process, their children, and so on."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop()
        if child not in found:
            found.add(child)
            pending.extend(children.get(child, []))
    return found


def mounts_under(path: Path) -> int:
    """Mount points inside `path` (a full check's workspace is a tmpfs mount)."""
    inside = str(path.resolve()) + "/"
    # /proc/self/mounts escapes spaces and other separators in paths as octal.
    points = (line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines())
    return sum(1 for point in points if point.startswith(inside))


def project_containers(project: str) -> list[str]:
    """Podman containers (running or not) labelled with the project: a full check's."""
    listed = subprocess.run(
        ["podman", "ps", "--all", "--quiet", "--filter", f"label=forkhorse.project={project}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return listed.split()


def processes_using(path: Path) -> set[int]:
    """Processes whose working directory or command line is inside `path`: what a
    service under `path` started, also after a crash left it without a parent."""
    inside = str(path.resolve())
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cwd == inside or cwd.startswith(inside + "/") or inside in cmdline:
            found.add(int(entry))
    return found


def meminfo_bytes(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def shmem_bytes() -> int:
    """Host shared memory, which is where tmpfs pages live."""
    return meminfo_bytes("Shmem")


def used_disk_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def tree_bytes(path: Path) -> int:
    """Allocated bytes under a directory (what it really takes on disk)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


@dataclass
class PeakSampler:
    """Samples a reading on a thread and keeps its peak over the sampled interval."""

    read: Callable[[], int]
    interval: float = 0.01
    baseline: int = 0
    peak: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.baseline)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.read())
            time.sleep(self.interval)


@contextmanager
def peak_of(read: Callable[[], int], interval: float = 0.01) -> Iterator[PeakSampler]:
    """`with peak_of(rss_bytes) as sample:` ... then assert on `sample.growth`."""
    sampler = PeakSampler(read, interval)
    sampler.baseline = sampler.peak = read()
    thread = threading.Thread(target=sampler._loop, daemon=True)
    thread.start()
    try:
        yield sampler
    finally:
        sampler._stop.set()
        thread.join()
        sampler.peak = max(sampler.peak, read())
