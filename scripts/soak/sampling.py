"""Leak samples of a running `forkhorse serve`: the server process's RSS, open files and
threads, its child processes, every process it left behind, its containers, and disk."""

from __future__ import annotations

from pathlib import Path

from forkhorse.adapters.containers.podman import RUNS_DIR, PodmanContainerPort
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.domain.limits import MIB
from forkhorse.wiring.local import CHECKOUTS_DIR, HISTORY_DIR

from scripts.soak.leaks import Bound
from tests.support.resources import (
    descendants,
    mounts_under,
    open_fds,
    processes_using,
    rss_bytes,
    thread_count,
    tree_bytes,
)

# The soak fails when any of these grows without bound (the rule: scripts/soak/leaks.py).
# Ceilings are generous for this machine; slack absorbs what comes and goes with the load
# (one run thread, one sandbox, one container per active check).
BOUNDS = (
    Bound("rss_bytes", ceiling=1024 * MIB, slack=32 * MIB, relative_slack=0.1),
    Bound("open_fds", ceiling=1024, slack=32, relative_slack=0.25),
    Bound("threads", ceiling=256, slack=12, relative_slack=0.25),
    Bound("children", ceiling=64, slack=4),
    # Outlive a crash: judged over the whole run, so what each kill leaves adds up.
    Bound("processes", ceiling=64, slack=4, per_process=False),
    Bound("containers", ceiling=8, slack=2, per_process=False),
    Bound("mounts", ceiling=8, slack=2, per_process=False),  # full checks' workspace tmpfs
    Bound("scratch_bytes", ceiling=512 * MIB, slack=32 * MIB, per_process=False),
    # The database, git repositories and run history are kept by design: a ceiling only.
    Bound("home_bytes", ceiling=2048 * MIB, slack=0, per_process=False, trend=False),
    Bound("history_bytes", ceiling=1024 * MIB, slack=0, per_process=False, trend=False),
    # One pack per push, never repacked: a git request opens up to one index per pack.
    Bound("pack_files", ceiling=5000, slack=0, per_process=False, trend=False),
)


class Sampler:
    def __init__(self, home: Path, server_tmp: Path) -> None:
        self.home, self.server_tmp = home, server_tmp
        self.podman = Podman()
        self.deployment = PodmanContainerPort(home).deployment

    def containers(self) -> int:
        listed = self.podman.output(
            "ps", "--all", "--quiet", "--filter", f"label=forkhorse.deployment={self.deployment}"
        )
        return len(listed.split())

    def processes(self, server: int | None) -> int:
        """Everything the server started that still runs, also what a crash orphaned."""
        tree = descendants(server) if server else set()
        return len((tree | processes_using(self.home)) - {server})

    def sample(self, server: int) -> dict[str, float]:
        scratch = (self.home / CHECKOUTS_DIR, self.home / RUNS_DIR, self.server_tmp)
        return {
            "rss_bytes": rss_bytes(server),
            "open_fds": open_fds(server),
            "threads": thread_count(server),
            "children": len(descendants(server)),
            "processes": self.processes(server),
            "containers": self.containers(),
            "mounts": mounts_under(self.home),
            "scratch_bytes": sum(tree_bytes(path) for path in scratch if path.exists()),
            "home_bytes": tree_bytes(self.home),
            "history_bytes": tree_bytes(self.home / HISTORY_DIR),
            "pack_files": len(list((self.home / "git").glob("*/objects/pack/*.pack"))),
        }
