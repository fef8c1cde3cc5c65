"""Local mode's adapters, wired once: SQLite, disk git, bubblewrap, podman, in-process events.

All state lives under one home directory. `forkhorse serve` and the tests build the same
`LocalRuntime`, so what the tests exercise is what a user runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from pathlib import Path

from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.adapters.events import InProcessEventBus
from forkhorse.adapters.evidence import StoreEvidenceDrop
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.adapters.sqlite_journal import SqlitePromoteJournal
from forkhorse.adapters.sqlite_store import SqliteStore
from forkhorse.domain.limits import QUEUE, QueueLimits
from forkhorse.ports.clock import Clock, SystemClock
from forkhorse.ports.containers import ContainerPort
from forkhorse.ports.sandbox import QuickSandbox
from forkhorse.runner.steps import (
    LOCAL_POLL_SECONDS,
    QuickDeps,
    RunnerDeps,
    exported_checkout,
)
from forkhorse.runner.supervisor import COLLECT_EVERY, LocalSupervisor

CHECKOUTS_DIR = "checkouts"
HISTORY_DIR = "history"
QUEUE_ENV_PREFIX = "FORKHORSE_QUEUE_"


def queue_limits(environ: Mapping[str, str]) -> QueueLimits:
    """The run queue's limits, each overridable for `forkhorse serve` by an environment
    variable named after it, e.g. FORKHORSE_QUEUE_RUNNING_PER_PROJECT=4."""
    overrides = {
        limit.name: int(environ[variable])
        for limit in fields(QueueLimits)
        if (variable := QUEUE_ENV_PREFIX + limit.name.upper()) in environ
    }
    return replace(QUEUE, **overrides)


@dataclass
class LocalRuntime:
    home: Path
    store: SqliteStore
    git: DiskGitHost
    events: InProcessEventBus
    images: ImageRegistry
    deps: RunnerDeps
    quick_deps: QuickDeps
    supervisor: LocalSupervisor
    journal: SqlitePromoteJournal

    def close(self) -> None:
        self.supervisor.shutdown()
        self.journal.close()
        self.store.close()


def build_local_runtime(
    home: Path,
    *,
    clock: Clock | None = None,
    sandbox: QuickSandbox | None = None,
    containers: ContainerPort | None = None,
    images: ImageRegistry | None = None,
    queue: QueueLimits | None = None,
    collect_every: timedelta = COLLECT_EVERY,
) -> LocalRuntime:
    """Wire local mode under `home`. Interrupted runs become infrastructure errors before
    any work is accepted; orphan containers and stale exports go in the background.
    `queue` defaults to QueueLimits with the environment's overrides (`queue_limits`)."""
    home.mkdir(parents=True, exist_ok=True)
    checkouts = home / CHECKOUTS_DIR
    checkouts.mkdir(exist_ok=True)
    store = SqliteStore(home)
    git = DiskGitHost(home)
    registry = images or ImageRegistry(home)
    clock = clock or SystemClock()
    evidence = StoreEvidenceDrop(store, clock)
    quick_deps = QuickDeps(sandbox=sandbox or BwrapSandbox(), git=git, evidence=evidence)
    deps = RunnerDeps(
        store=store,
        git=git,
        containers=containers or PodmanContainerPort(home, registry),
        evidence=evidence,
        clock=clock,
        checkout_source=exported_checkout(checkouts),
        poll_seconds=LOCAL_POLL_SECONDS,
    )
    supervisor = LocalSupervisor(
        deps,
        quick_deps,
        home / HISTORY_DIR,
        limits=queue or queue_limits(os.environ),
        checkouts=checkouts,
        packs=git,
        collect_every=collect_every,
    )
    supervisor.recover()
    journal = SqlitePromoteJournal(store.path)
    return LocalRuntime(
        home, store, git, InProcessEventBus(), registry, deps, quick_deps, supervisor, journal
    )
