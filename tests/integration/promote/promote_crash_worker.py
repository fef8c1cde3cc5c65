"""A Forkhorse process that promotes one approved review (required mode, a quick check)
and kills itself with SIGKILL right after the named promote step's journal write.

`promote_and_die` is the worker, forked by tests/support/forked.py; it sends the ids once
the review is approved, then promotes.
"""

import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service.facade import ServiceSettings
from forkhorse.service.identity import Caller
from forkhorse.wiring.local import build_local_app, build_local_runtime

from tests.support.gitrepo import commit_files

OWNER = Caller("6f1c2a8e-0b7d-4c3e-9a55-1d2e3f4a5b6c", "owner")
PASSING = {
    ".forkhorse/checks": '[{"name":"quick","tier":"quick","module":".forkhorse/quick/check.py"}]\n',
    ".forkhorse/quick/check.py": "def check(ctx):\n    return {'ok': True, 'message': 'ok'}\n",
}


def _kill_after(step: str) -> Callable[[str], None]:
    def after(done: str) -> None:
        if done == step:
            os.kill(os.getpid(), signal.SIGKILL)

    return after


def promote_and_die(messages: Connection, home: Path, step: str) -> None:
    runtime = build_local_runtime(home)
    app = build_local_app(runtime, ServiceSettings(), after_step=_kill_after(step))
    service = app.service
    project = service.projects.create_project(OWNER, "proj", True).project.id
    repos = runtime.git.store(project)
    initial = commit_files(repos, {"README.md": "hello\n"})
    capability = mint_canonical_write_capability(project)
    assert repos.update_canonical_ref(capability, DEFAULT_BRANCH, None, initial)
    agent_id = service.projects.create_agent(OWNER, "agent").agent.id
    service.projects.add_member(OWNER, project, agent_id)
    agent = Caller(agent_id, "agent")
    fork = service.projects.create_fork(agent, project, "fork").fork.id
    packet = service.projects.create_packet(OWNER, project, "packet").packet.id
    service.projects.claim(agent, project, packet)
    commit = commit_files(repos, PASSING, parent=initial)
    assert repos.update_fork_ref(fork, DEFAULT_BRANCH, initial, commit)
    review = service.reviews.request(agent, project, packet, fork, commit, False).review.id
    while runtime.store.get_review(review).execution.summary.status == "running":  # type: ignore[union-attr]
        time.sleep(0.05)
    service.approvals.approve(OWNER, project, review, commit)
    messages.send({"project": project, "review": review, "commit": commit, "initial": initial})
    service.promotions.promote(OWNER, project, review, commit, wait_seconds=0)
    time.sleep(600)  # the hook kills the process; a step never reached leaves it here
