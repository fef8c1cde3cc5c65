"""A Forkhorse process that walks one review's whole path with every write counted:
push → review (a quick and a full check) → attach → approve → promote (required mode, so
the gate and the before-promote rerun matter). The Store, the git stores, their snapshots
and the promote journal are `Faulty`, so the process can kill itself at any write.

`run` is the worker, forked from a preloaded parent (tests/support/forked.py). Without a
crash point it records: it walks the whole path and logs every write to LOG. With one it
kills itself with SIGKILL before or after that write. It sends the ids once the project is
set up (before any counted write).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.adapters.sqlite.transparency import SqliteLogLedger
from forkhorse.adapters.sqlite_journal import SqlitePromoteJournal
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service.facade import ServiceSettings
from forkhorse.service.identity import Caller
from forkhorse.service.promote.request import PromoteAnswer
from forkhorse.wiring import local as wiring
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.integration.runner.scenarios import checks_file, full, quick
from tests.support.faults import CrashPoint, FaultPlan, Faulty, PathWrite
from tests.support.gitrepo import commit_files
from tests.support.status import http_status

OWNER = Caller("6f1c2a8e-0b7d-4c3e-9a55-1d2e3f4a5b6c", "owner")
# The cheapest real checks: a bubblewrap quick check and a busybox container.
PASSING = {
    ".forkhorse/checks": checks_file(quick("quick", "check"), full("full", "test -f README.md")),
    ".forkhorse/quick/check.py": "def check(ctx):\n    return {'ok': True, 'message': 'ok'}\n",
    "README.md": "hello, promoted\n",
}
RUN_SECONDS = 120.0
# Every write of the walk, in order, with its step; the recording test proves it is what a
# real walk does. The before-promote run repeats the review run's steps and writes.
PATH = [
    PathWrite("DiskGitStore.update_fork_ref", "push"),
    PathWrite("SqliteStore.create_review", "request"),  # with its running execution
    PathWrite("SqliteStore.update_summary", "prepare"),  # the checks, running
    PathWrite("SqliteStore.put_record_chunks", "quick"),  # the quick check's evidence drop
    PathWrite("SqliteStore.update_summary", "quick"),  # its result on /state...
    PathWrite("SqliteStore.put_record_chunks", "quick"),  # ...and its check record
    PathWrite("DulwichSnapshot.export_to", "full"),  # the full check's checkout
    PathWrite("SqliteStore.update_summary", "full"),  # its result on /state...
    PathWrite("SqliteStore.put_record_chunks", "full"),  # ...and its check record
    PathWrite("SqliteStore.put_record_chunks", "finalize"),  # the receipt record...
    PathWrite("SqliteLogLedger.intend", "finalize"),  # its log entry's intent, signed...
    PathWrite("SqliteLogLedger.append", "finalize"),  # ...logged...
    PathWrite("SqliteLogLedger.publish", "finalize"),  # ...in a signed checkpoint...
    PathWrite("SqliteStore.attach", "finalize"),  # ...attached
    PathWrite("SqliteLogLedger.intend", "approve"),
    PathWrite("SqliteStore.approve", "approve"),
    PathWrite("SqliteLogLedger.append", "approve"),
    PathWrite("SqliteLogLedger.publish", "approve"),
    PathWrite("SqliteStore.request_promotion", "promote"),
    PathWrite("SqlitePromoteJournal.start", "promote"),
    PathWrite("SqliteStore.acquire_lease", "Acquire"),
    PathWrite("SqliteStore.begin_promotion", "Acquire"),
    PathWrite("SqlitePromoteJournal.record", "Acquire"),
    PathWrite("SqliteStore.start_execution", "StartRun"),  # the before-promote run
    PathWrite("SqlitePromoteJournal.record", "StartRun"),
    PathWrite("SqliteStore.update_summary", "prepare"),  # RunChecks: the run's steps again
    PathWrite("SqliteStore.put_record_chunks", "quick"),
    PathWrite("SqliteStore.update_summary", "quick"),
    PathWrite("SqliteStore.put_record_chunks", "quick"),
    PathWrite("DulwichSnapshot.export_to", "full"),
    PathWrite("SqliteStore.update_summary", "full"),
    PathWrite("SqliteStore.put_record_chunks", "full"),
    PathWrite("SqliteStore.put_record_chunks", "finalize"),
    PathWrite("SqliteLogLedger.intend", "finalize"),
    PathWrite("SqliteLogLedger.append", "finalize"),
    PathWrite("SqliteLogLedger.publish", "finalize"),
    PathWrite("SqliteStore.attach", "finalize"),
    PathWrite("SqlitePromoteJournal.record", "RunChecks"),
    PathWrite("SqliteStore.arm_promotion", "Verify"),
    PathWrite("SqlitePromoteJournal.record", "Verify"),
    PathWrite("DiskGitStore.update_canonical_ref", "Write"),
    PathWrite("SqliteStore.settle_promotion", "Write"),
    PathWrite("SqliteLogLedger.intend", "Write"),  # the VSA's entry, signed...
    PathWrite("SqliteLogLedger.append", "Write"),  # ...after its approval's (again: no-op)...
    PathWrite("SqliteLogLedger.append", "Write"),  # ...and its receipt's (again: no-op)...
    PathWrite("SqliteLogLedger.append", "Write"),  # ...logged...
    PathWrite("SqliteLogLedger.publish", "Write"),  # ...in a signed checkpoint
    PathWrite("SqlitePromoteJournal.record", "Write"),
    PathWrite("SqliteStore.release_lease", "Release"),
    PathWrite("SqlitePromoteJournal.record", "Release"),
    PathWrite("SqlitePromoteJournal.record", "Ended"),
]
PATH_WRITES = [point.write for point in PATH]


def faulty_wiring(plan: FaultPlan, patch: Callable[[object, str, Any], None] = setattr) -> None:
    """Local wiring builds its Store, git host and journal through these names."""

    def wrap(real: Any) -> Any:
        return lambda *args, **kwargs: Faulty(real(*args, **kwargs), plan)

    for name, real in (
        ("SqliteStore", SqliteStore),
        ("DiskGitHost", DiskGitHost),
        ("SqlitePromoteJournal", SqlitePromoteJournal),
        ("SqliteLogLedger", SqliteLogLedger),
    ):
        patch(wiring, name, wrap(real))


def set_up(app: LocalApp) -> dict[str, str]:
    """A required-mode project with canonical at an initial commit, an agent holding a
    claim, and its fork; the commit to promote exists as objects but is not pushed."""
    service = app.service
    project = service.projects.create_project(OWNER, "proj", True).project.id
    repos = app.runtime.git.store(project)
    initial = commit_files(repos, {"README.md": "hello\n"})
    capability = mint_canonical_write_capability(project)
    assert repos.update_canonical_ref(capability, DEFAULT_BRANCH, None, initial)
    agent = service.projects.create_agent(OWNER, "agent").agent.id
    service.projects.add_member(OWNER, project, agent)
    fork = service.projects.create_fork(Caller(agent, "agent"), project, "fork").fork.id
    packet = service.projects.create_packet(OWNER, project, "packet").packet.id
    service.projects.claim(Caller(agent, "agent"), project, packet)
    commit = commit_files(repos, PASSING, parent=initial)
    return {
        "project": project,
        "agent": agent,
        "fork": fork,
        "packet": packet,
        "initial": initial,
        "commit": commit,
    }


def walk(app: LocalApp, ids: dict[str, str]) -> PromoteAnswer:
    """The path, each step as a user drives it, waiting for each to finish; the promote's
    answer once its workflow has ended."""
    service, store = app.service, app.runtime.store
    project, commit = ids["project"], ids["commit"]
    agent = Caller(ids["agent"], "agent")
    repos = app.runtime.git.store(project)
    assert repos.update_fork_ref(ids["fork"], DEFAULT_BRANCH, ids["initial"], commit)
    review = service.reviews.request(agent, project, ids["packet"], ids["fork"], commit, False)
    review_id = review.review.id
    deadline = time.monotonic() + RUN_SECONDS
    while store.get_review(review_id).execution.summary.status == "running":  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the review's run did not finish"
        time.sleep(0.05)
    service.approvals.approve(OWNER, project, review_id, commit)
    answer = service.promotions.promote(OWNER, project, review_id, commit, wait_seconds=0)
    for promotion in store.list_promotions(project):
        assert app.promotes.wait(promotion.id, RUN_SECONDS), "the promote workflow hung"
    return service.promotions.status(OWNER, project, review_id) if answer.pending else answer


def run(
    messages: Connection, home: Path, images: Path, log: Path, crash: CrashPoint | None
) -> None:
    """The worker (forked by tests/support/forked.py): set up, send the ids, walk the path;
    at `crash` the plan kills the process."""
    plan = FaultPlan(log=log, crash=crash)
    faulty_wiring(plan)
    runtime = build_local_runtime(home, images=ImageRegistry(images))
    app = build_local_app(runtime, ServiceSettings())
    assert app.runtime.supervisor.recovered(60)
    ids = set_up(app)
    messages.send(ids)
    plan.armed = True
    answer = walk(app, ids)
    plan.armed = False
    assert http_status(answer) == 200, answer.body
    app.close()
