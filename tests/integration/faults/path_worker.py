"""A Forkhorse process that walks one review's whole path with every write counted:
push → review (a quick and a full check) → attach → approve → promote (required mode, so
the gate and the before-promote rerun matter). The Store, the git stores, their snapshots
and the promote journal are `Faulty`, so the process can kill itself at any write.

Usage: python -m tests.integration.faults.path_worker HOME IMAGES LOG [INDEX PHASE]
Without INDEX it records: it walks the whole path and logs every write to LOG. With INDEX
and PHASE it kills itself with SIGKILL before or after that write. It prints the ids as
JSON once the project is set up (before any counted write) and `done` at the end.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sqlite_journal import SqlitePromoteJournal
from forkhorse.adapters.sqlite_store import SqliteStore
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service import ServiceSettings
from forkhorse.service.identity import Caller
from forkhorse.service.promotions import PromoteAnswer
from forkhorse.wiring import local as wiring
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.integration.runner.scenarios import checks_file, full, quick
from tests.support.faults import CrashPoint, FaultPlan, Faulty
from tests.support.gitrepo import commit_files

OWNER = Caller("6f1c2a8e-0b7d-4c3e-9a55-1d2e3f4a5b6c", "owner")
# The cheapest real checks: a bubblewrap quick check and a busybox container.
PASSING = {
    ".forkhorse/checks": checks_file(quick("quick", "check"), full("full", "test -f README.md")),
    ".forkhorse/quick/check.py": "def check(ctx):\n    return {'ok': True, 'message': 'ok'}\n",
    "README.md": "hello, promoted\n",
}
RUN_SECONDS = 120.0
# Every write of the walk, in order; the recording test proves it is what a real walk does.
PATH_WRITES = [
    "DiskGitStore.update_fork_ref",  # the push
    "SqliteStore.create_review",  # the review, with its running execution
    "SqliteStore.update_summary",  # prepare: the checks, running
    "SqliteStore.put_record_chunks",  # the quick check's evidence drop
    "SqliteStore.update_summary",  # its result on /state...
    "SqliteStore.put_record_chunks",  # ...and its check record
    "DulwichSnapshot.export_to",  # the full check's checkout
    "SqliteStore.update_summary",  # its result on /state...
    "SqliteStore.put_record_chunks",  # ...and its check record
    "SqliteStore.put_record_chunks",  # finalize: the receipt record...
    "SqliteStore.attach",  # ...attached
    "SqliteStore.approve",
    "SqliteStore.request_promotion",
    "SqlitePromoteJournal.start",
    "SqliteStore.acquire_lease",  # Acquire
    "SqliteStore.begin_promotion",
    "SqlitePromoteJournal.record",
    "SqliteStore.start_execution",  # StartRun: the before-promote run
    "SqlitePromoteJournal.record",
    "SqliteStore.update_summary",  # RunChecks, as above
    "SqliteStore.put_record_chunks",
    "SqliteStore.update_summary",
    "SqliteStore.put_record_chunks",
    "DulwichSnapshot.export_to",
    "SqliteStore.update_summary",
    "SqliteStore.put_record_chunks",
    "SqliteStore.put_record_chunks",
    "SqliteStore.attach",
    "SqlitePromoteJournal.record",
    "SqliteStore.arm_promotion",  # Verify
    "SqlitePromoteJournal.record",
    "DiskGitStore.update_canonical_ref",  # Write
    "SqliteStore.settle_promotion",
    "SqlitePromoteJournal.record",
    "SqliteStore.release_lease",  # Release
    "SqlitePromoteJournal.record",
    "SqlitePromoteJournal.record",  # Ended
]


def faulty_wiring(plan: FaultPlan, patch: Callable[[object, str, Any], None] = setattr) -> None:
    """Local wiring builds its Store, git host and journal through these names."""

    def wrap(real: Any) -> Any:
        return lambda *args, **kwargs: Faulty(real(*args, **kwargs), plan)

    for name, real in (
        ("SqliteStore", SqliteStore),
        ("DiskGitHost", DiskGitHost),
        ("SqlitePromoteJournal", SqlitePromoteJournal),
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
    return service.promotions.status(OWNER, project, review_id) if answer.status == 202 else answer


def main() -> None:
    home, images, log = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    crash = CrashPoint(int(sys.argv[4]), sys.argv[5]) if len(sys.argv) > 5 else None
    plan = FaultPlan(log=log, crash=crash)
    faulty_wiring(plan)
    runtime = build_local_runtime(home, images=ImageRegistry(images))
    app = build_local_app(runtime, ServiceSettings())
    assert app.runtime.supervisor.recovered(60)
    ids = set_up(app)
    print(json.dumps(ids), flush=True)
    plan.armed = True
    answer = walk(app, ids)
    plan.armed = False
    assert answer.status == 200, answer.body
    app.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
