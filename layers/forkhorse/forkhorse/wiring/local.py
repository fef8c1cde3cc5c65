"""Local mode's composition root: SQLite, disk git, bubblewrap, podman and in-process
events (`LocalRuntime`), and the service, API, git and promotes over them (`LocalApp`).

All state lives under one home directory. `forkhorse serve`, the demo and the tests build the
same `LocalApp`, so what the tests exercise is what a user runs.
"""

from __future__ import annotations

import argparse
import functools
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from forkhorse.adapters.containers.images import IMAGE_NAMES as IMAGE_NAMES
from forkhorse.adapters.containers.images import ImageRegistry, LocalImages, user_cache_dir
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.adapters.containers.podman_cli import Podman
from forkhorse.adapters.disk_log import DiskLogFiles
from forkhorse.adapters.events import InProcessEventBus
from forkhorse.adapters.evidence import StoreEvidenceDrop
from forkhorse.adapters.git.ancestry import SqliteAncestryMemo
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.log_publisher import InlinePublisher
from forkhorse.adapters.sandbox.bwrap import BwrapSandbox
from forkhorse.adapters.signing.local_key import LocalKeyring
from forkhorse.adapters.sqlite import DATABASE_NAME, SqliteStore
from forkhorse.adapters.sqlite.attestations import SqliteAttestations
from forkhorse.adapters.sqlite.transparency import SqliteLogLedger
from forkhorse.adapters.sqlite_journal import SqlitePromoteJournal
from forkhorse.api.app import ForkhorseApi
from forkhorse.api.wsgi import LocalHttp
from forkhorse.attest.attestor import Attestor
from forkhorse.domain.limits import QueueLimits
from forkhorse.githttp.http import GitHttpApp
from forkhorse.ports.clock import Clock, SystemClock
from forkhorse.ports.containers import ContainerPort
from forkhorse.ports.events import PUSH_EVENT, PushDetail
from forkhorse.ports.sandbox import QuickSandbox
from forkhorse.runner.local.promote import AfterStep, LocalPromotes
from forkhorse.runner.local.supervisor import LocalSupervisor
from forkhorse.runner.workflow.steps import (
    QuickDeps,
    RunnerDeps,
    exported_checkout,
)
from forkhorse.service.ancestry import GenerationAncestry
from forkhorse.service.facade import Service, ServiceSettings
from forkhorse.service.log_events import GateLog
from forkhorse.service.log_publishing import LogPublishing, LogSelfCheck
from forkhorse.service.log_repair import repair_intents
from forkhorse.service.transparency import TransparencyLog
from forkhorse.tlog.verify import LogKey
from forkhorse.wiring.git_access import git_repo_lookup, git_token_resolver
from forkhorse.wiring.settings import LocalSettings

CHECKOUTS_DIR = "checkouts"
HISTORY_DIR = "history"
ANCESTRY_NAME = "ancestry.sqlite"  # generations and answers (adapters/git/ancestry.py)
LOG_DIR = "log"  # the log's tiles and checkpoint, laid out as served under /log/
LOG_ORIGIN_NAME = "log-origin"
LOG_LOCK_NAME = "log.lock"
OWNER_TOKEN_FILE = "owner-token"  # noqa: S105 - a file name, not a secret
RECOVERY_WAIT_ON_CLOSE_SECONDS = 10.0


def queue_limits(environ: Mapping[str, str] | None = None) -> QueueLimits:
    """The run queue's limits with the environment's overrides (`LocalSettings.queue`)."""
    return LocalSettings.from_environ(environ).queue


def add_home_argument(parser: argparse.ArgumentParser) -> None:
    """`--home`, as every command on a local home spells it."""
    parser.add_argument(
        "--home",
        type=Path,
        default=Path(LocalSettings.from_environ().home),
        help="state directory (FORKHORSE_HOME; default .forkhorse-local)",
    )


def open_home(home: Path) -> tuple[SqliteStore, DiskGitHost] | None:
    """An existing home's Store and git, for `forkhorse gc`; None if it holds no state."""
    if not (home / DATABASE_NAME).is_file():
        return None
    return SqliteStore(home), DiskGitHost(home)


def local_images(home: Path) -> LocalImages:
    """`forkhorse image`'s adapters: the home's image registry and the host's podman."""
    return LocalImages(ImageRegistry(home), Podman(), user_cache_dir())


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
    log_check: LogSelfCheck

    def close(self) -> None:
        self.supervisor.shutdown()
        self.journal.close()
        if self.deps.attestor is not None:
            self.deps.attestor.close()
        self.git.close()
        self.store.close()


def build_local_runtime(
    home: Path,
    *,
    clock: Clock | None = None,
    sandbox: QuickSandbox | None = None,
    containers: ContainerPort | None = None,
    images: ImageRegistry | None = None,
    queue: QueueLimits | None = None,
    collect_every: timedelta | None = None,
) -> LocalRuntime:
    """Wire local mode under `home`. Interrupted runs become infrastructure errors before
    any work is accepted; orphan containers and stale exports go in the background.
    `queue` defaults to QueueLimits with the environment's overrides (`queue_limits`)."""
    settings = LocalSettings.from_environ()
    home.mkdir(parents=True, exist_ok=True)
    checkouts = home / CHECKOUTS_DIR
    checkouts.mkdir(exist_ok=True)
    store = SqliteStore(home)
    git = DiskGitHost(home)
    registry = images or ImageRegistry(home)
    clock = clock or SystemClock()
    evidence = StoreEvidenceDrop(store, clock)
    attestor = local_attestor(home, store.path, clock)
    gate_log, log_check = local_gate_log(home, store.path, attestor, clock)
    quick_deps = QuickDeps(sandbox=sandbox or BwrapSandbox(), git=git, evidence=evidence)
    deps = RunnerDeps(
        store=store,
        git=git,
        containers=containers or PodmanContainerPort(home, registry),
        evidence=evidence,
        clock=clock,
        checkout_source=exported_checkout(checkouts),
        attestor=attestor,
        gate_log=gate_log,
    )
    supervisor = LocalSupervisor(
        deps,
        quick_deps,
        home / HISTORY_DIR,
        limits=queue or settings.queue,
        checkouts=checkouts,
        packs=git,
        collect_every=collect_every or timedelta(seconds=settings.gc_interval_seconds),
        collect_grace=timedelta(seconds=settings.gc_grace_seconds),
    )
    supervisor.recover()
    journal = SqlitePromoteJournal(store.path)
    return LocalRuntime(
        home,
        store,
        git,
        InProcessEventBus(),
        registry,
        deps,
        quick_deps,
        supervisor,
        journal,
        log_check,
    )


def local_attestor(home: Path, database: Path, clock: Clock) -> Attestor:
    """The home's signing key (made at first start, listed at once) and its envelopes."""
    attestor = Attestor(SqliteAttestations(database), LocalKeyring(home).signer())
    attestor.install_key(clock.now())
    return attestor


def local_gate_log(
    home: Path, database: Path, attestor: Attestor, clock: Clock
) -> tuple[GateLog, LogSelfCheck]:
    """The home's transparency log: the ledger in the Store's database, tiles under
    `home/log`, published in process with the home's key; and its self-check."""
    files = DiskLogFiles(home / LOG_DIR)
    ledger = SqliteLogLedger(database)
    signer = attestor.signer
    if signer is None:
        raise RuntimeError("the local log is signed with the home's key")
    key = LogKey(log_origin(home), signer.public_key.keyval["public"])
    check = LogSelfCheck(ledger, files, key, clock)
    publisher = InlinePublisher(
        LogPublishing(ledger, files, key, signer, clock), home / LOG_LOCK_NAME
    )
    transparency = TransparencyLog(ledger, files, publisher, clock, key)
    gate = GateLog(transparency, attestor)
    check.objects = gate.object_problem
    publisher.request()  # the first checkpoint, and whatever a crash left unpublished
    transparency.log_key_change()  # after `forkhorse keys rotate`, checkpoints of the new key
    return gate, check


def open_log_check(home: Path) -> LogSelfCheck | None:
    """`forkhorse log-check`'s: the home's log and envelopes, read beside a running server
    (no runtime, no key: the check verifies with the public half)."""
    database = home / DATABASE_NAME
    if not (database.is_file() and (home / LOG_ORIGIN_NAME).is_file()):
        return None
    keyring = LocalKeyring(home)
    current = keyring.current_keyid()
    public = next((k for k in keyring.public_keys() if k.keyid == current), None)
    if public is None:
        return None
    key = LogKey(log_origin(home), public.keyval["public"])
    attestor = Attestor(SqliteAttestations(database))
    objects = GateLog(None, attestor).object_problem
    return LogSelfCheck(
        SqliteLogLedger(database), DiskLogFiles(home / LOG_DIR), key, SystemClock(), objects
    )


def log_origin(home: Path) -> str:
    """The log's name (its checkpoints' origin line), chosen once per home and kept: a
    witness pins it, so it must not follow the port or the public URL."""
    path = home / LOG_ORIGIN_NAME
    if not path.is_file():
        _write_new(path, f"forkhorse.local/{secrets.token_hex(8)}\n")
    return path.read_text(encoding="utf-8").strip()


def _write_new(path: Path, text: str) -> None:
    try:
        with path.open("x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        pass  # another process chose first: its name stands


def rotate_local_key(home: Path, clock: Clock | None = None) -> str:
    """`forkhorse keys rotate`: a new key signs from now on; the old one stays listed.
    Returns the new key's id. A running server keeps its key until it restarts."""
    if not (home / DATABASE_NAME).is_file():
        raise FileNotFoundError(f"{home} holds no Forkhorse state")
    signer = LocalKeyring(home).rotate()
    attestor = Attestor(SqliteAttestations(home / DATABASE_NAME), signer)
    try:
        attestor.install_key((clock or SystemClock()).now())
    finally:
        attestor.close()
    return signer.public_key.keyid


def local_public_keys(home: Path) -> list[tuple[str, str, bool]]:
    """Every key the home made: (keyid, public PEM, whether it is the current one)."""
    keyring = LocalKeyring(home)
    current = keyring.current_keyid()
    return [(k.keyid, k.keyval["public"], k.keyid == current) for k in keyring.public_keys()]


@dataclass
class LocalApp:
    runtime: LocalRuntime
    service: Service
    api: ForkhorseApi
    http: LocalHttp
    promotes: LocalPromotes

    def close(self) -> None:
        self.service.shutdown()
        # recovery reads the store: let it finish (it is short) before the store closes
        self.promotes.recovered(RECOVERY_WAIT_ON_CLOSE_SECONDS)
        self.runtime.close()


def build_local_app(
    runtime: LocalRuntime, settings: ServiceSettings, after_step: AfterStep | None = None
) -> LocalApp:
    """`after_step` is called after each promote step's journal write (tests crash there)."""
    service = Service(
        runtime.store,
        runtime.git,
        runtime.supervisor,
        runtime.deps.clock,
        settings,
        runtime.deps.attestor,
        GenerationAncestry(SqliteAncestryMemo(runtime.home / ANCESTRY_NAME)),
        runtime.deps.gate_log,
    )
    log_upkeep = functools.partial(_log_upkeep, service, runtime.log_check)
    log_upkeep()  # what a crash left between an object and its entry, then a check
    runtime.supervisor.attach_upkeep(log_upkeep)  # and again at each collection
    promotes = LocalPromotes(
        service.context, runtime.journal, runtime.home / HISTORY_DIR, after_step
    )
    runtime.supervisor.attach_promotes(promotes)
    promotes.resume_in_background()  # the server listens at once
    runtime.events.subscribe(PUSH_EVENT, lambda detail: _follow(service, detail))
    api = ForkhorseApi(service)
    git = GitHttpApp(
        runtime.git,
        git_token_resolver(service),
        git_repo_lookup(service),
        runtime.events,
        import_log=runtime.deps.gate_log,
    )
    return LocalApp(runtime, service, api, LocalHttp(api, git), promotes)


def _log_upkeep(service: Service, check: LogSelfCheck) -> None:
    repair_intents(service.context)
    check.run()


def _follow(service: Service, detail: Mapping[str, object]) -> None:
    service.reviews.on_push(PushDetail.model_validate(detail))


def ensure_owner_token(service: Service, home: Path) -> str:
    """The owner's token, in `home/owner-token` (mode 0600); created on first start."""
    path = home / OWNER_TOKEN_FILE
    if path.is_file():
        token = path.read_text(encoding="utf-8").strip()
        if service.authenticate(token) is not None:
            return token
    _, token = service.projects.create_principal("owner", "owner")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token
