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
from pathlib import Path
from typing import Any

from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sqlite_journal import SqlitePromoteJournal
from forkhorse.adapters.sqlite_store import SqliteStore
from forkhorse.api.local import LocalApp, build_local_app
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service import ServiceSettings
from forkhorse.service.identity import Caller
from forkhorse.wiring import local as wiring
from forkhorse.wiring.local import build_local_runtime

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


def faulty_wiring(plan: FaultPlan) -> None:
    """Local wiring builds its Store, git host and journal through these names."""

    def wrap(real: Any) -> Any:
        return lambda *args, **kwargs: Faulty(real(*args, **kwargs), plan)

    wiring.SqliteStore = wrap(SqliteStore)  # type: ignore[misc]
    wiring.DiskGitHost = wrap(DiskGitHost)  # type: ignore[misc]
    wiring.SqlitePromoteJournal = wrap(SqlitePromoteJournal)  # type: ignore[misc]


def set_up(app: LocalApp) -> dict[str, str]:
    """A required-mode project with canonical at an initial commit, an agent holding a
    claim, and its fork; the commit to promote exists as objects but is not pushed."""
    service = app.service
    project = service.projects.create_project(OWNER, "proj", True)["project"]["id"]
    repos = app.runtime.git.store(project)
    initial = commit_files(repos, {"README.md": "hello\n"})
    capability = mint_canonical_write_capability(project)
    assert repos.update_canonical_ref(capability, DEFAULT_BRANCH, None, initial)
    agent = service.projects.create_agent(OWNER, "agent")["agent"]["id"]
    service.projects.add_member(OWNER, project, agent)
    fork = service.projects.create_fork(Caller(agent, "agent"), project, "fork")["fork"]["id"]
    packet = service.projects.create_packet(OWNER, project, "packet")["packet"]["id"]
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


def walk(app: LocalApp, ids: dict[str, str]) -> None:
    """The path, each step as a user drives it, waiting for each to finish."""
    service, store = app.service, app.runtime.store
    project, commit = ids["project"], ids["commit"]
    agent = Caller(ids["agent"], "agent")
    repos = app.runtime.git.store(project)
    assert repos.update_fork_ref(ids["fork"], DEFAULT_BRANCH, ids["initial"], commit)
    review = service.reviews.request(agent, project, ids["packet"], ids["fork"], commit, False)
    review_id = review["review"]["id"]
    deadline = time.monotonic() + RUN_SECONDS
    while store.get_review(review_id).execution.summary.status == "running":  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the review's run did not finish"
        time.sleep(0.05)
    service.approvals.approve(OWNER, project, review_id, commit)
    answer = service.promotions.promote(OWNER, project, review_id, commit, wait_seconds=0)
    while answer.status == 202:
        assert time.monotonic() < deadline + RUN_SECONDS, "the promote did not settle"
        time.sleep(0.05)
        answer = service.promotions.status(OWNER, project, review_id)
    assert answer.status == 200, answer.body
    for promotion in store.list_promotions(project):  # its Release and last journal entries
        assert app.promotes.wait(promotion.id, RUN_SECONDS), "the promote workflow hung"


def main() -> None:
    home, images, log = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    crash = CrashPoint(int(sys.argv[4]), sys.argv[5]) if len(sys.argv) > 5 else None  # type: ignore[arg-type]
    plan = FaultPlan(log=log, crash=crash)
    faulty_wiring(plan)
    runtime = build_local_runtime(home, images=ImageRegistry(images))
    app = build_local_app(runtime, ServiceSettings())
    assert app.runtime.supervisor.recovered(60)
    ids = set_up(app)
    print(json.dumps(ids), flush=True)
    plan.armed = True
    walk(app, ids)
    plan.armed = False
    app.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
