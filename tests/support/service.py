"""The fast service tier: the real `Service` over SQLite in a temp dir and disk git, with the
mock quick sandbox and mock container port (their evidence stays mocked, so the required
gate refuses it), a fake clock and a synchronous orchestrator. Approve, promote and review
rules run in milliseconds, without podman, bubblewrap or HTTP.

The orchestrator is synchronous at its port: `start_run` and `start_promote` return once the
run or the promote workflow has ended. The work itself is the production code's: the local
supervisor runs the receipt run's steps and `LocalPromotes` the promote steps, so what these
tests exercise is what `forkhorse serve` runs.

Outcomes follow check names, so a commit's `.forkhorse/checks` says what happens: a quick
check named `QUICK_FAILS` fails, a full check named `FULL_FAILS` exits 1, every other passes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.containers.mock import MockContainerPort, MockRun
from forkhorse.adapters.git.store import DulwichGitStore
from forkhorse.adapters.sandbox.mock import MockSandbox
from forkhorse.domain.git_access import mint_canonical_write_capability
from forkhorse.domain.model import Review
from forkhorse.domain.run import RunRef
from forkhorse.ports.events import PUSH_EVENT, PushDetail
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.runner.local.promote import LocalPromotes
from forkhorse.runner.local.supervisor import LocalSupervisor
from forkhorse.service.facade import Service, ServiceSettings
from forkhorse.service.identity import Caller
from forkhorse.wiring.local import HISTORY_DIR, LocalRuntime, build_local_runtime
from pydantic import BaseModel

from tests.support.gitrepo import commit_files

QUICK_FAILS = "quick-fails"
FULL_FAILS = "full-fails"
CLAIM_TTL = timedelta(minutes=30)
# Generous: a synchronous run takes milliseconds, but the machine may be loaded.
RUN_TIMEOUT_SECONDS = 60.0
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


class FakeClock:
    """Time stands still until a test moves it."""

    def __init__(self, start: datetime = START) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta


class SyncOrchestrator:
    """The Orchestrator port over the local supervisor and promote workflows, returning from
    each start only once that run or workflow has ended."""

    def __init__(self, supervisor: LocalSupervisor) -> None:
        self._supervisor = supervisor
        self._promotes: LocalPromotes | None = None

    def attach_promotes(self, promotes: LocalPromotes) -> None:
        """The promote workflows need the service's context, which is built on this."""
        self._promotes = promotes

    def start_run(self, run: RunRef) -> str:
        handle = self._supervisor.start_run(run)
        if not self._supervisor.wait(run, RUN_TIMEOUT_SECONDS):
            raise AssertionError(f"receipt run {run.generation} did not end")
        return handle

    def cancel_run(self, run: RunRef) -> bool:
        return self._supervisor.cancel_run(run)

    def wait(self, run: RunRef, timeout_seconds: float) -> bool:
        return self._supervisor.wait(run, timeout_seconds)

    def history(self, run: RunRef) -> list[dict[str, Any]]:
        return self._supervisor.history(run)

    def start_promote(self, project_id: str, promotion_id: str) -> str:
        promotes = self._attached()
        name = promotes.start(project_id, promotion_id)
        if not promotes.wait(promotion_id, RUN_TIMEOUT_SECONDS):
            raise AssertionError(f"promote workflow {promotion_id} did not end")
        return name

    def promote_history(self, project_id: str, promotion_id: str) -> list[dict[str, Any]]:
        return self._attached().history(promotion_id)

    def _attached(self) -> LocalPromotes:
        if self._promotes is None:
            raise RuntimeError("promote workflows are not attached")
        return self._promotes


def checks(*entries: tuple[str, str]) -> dict[str, str | bytes]:
    """A `.forkhorse/checks` declaring (name, tier) checks, with each quick check's module."""
    declared: list[str] = []
    files: dict[str, str | bytes] = {}
    for name, tier in entries:
        if tier == "quick":
            module = f".forkhorse/quick/{name}.py"
            declared.append(f'{{"name":"{name}","tier":"quick","module":"{module}"}}')
            files[module] = "def check(ctx):\n    return {'ok': True, 'message': 'ok'}\n"
        else:
            declared.append(f'{{"name":"{name}","tier":"full","image":"default","run":"true"}}')
    files[".forkhorse/checks"] = "[" + ",".join(declared) + "]\n"
    return files


PASSING = checks(("quick", "quick"), ("full", "full"))
QUICK_FAILING = checks((QUICK_FAILS, "quick"), ("full", "full"))
FULL_FAILING = checks(("quick", "quick"), (FULL_FAILS, "full"))


def wire(answer: BaseModel) -> dict[str, Any]:
    """A service answer as the API sends it: the JSON object a spec shape is compared with."""
    body: dict[str, Any] = answer.model_dump(mode="json", by_alias=True)
    return body


@dataclass
class Lane:
    """One agent working one claimed packet on its own fork."""

    agent: Caller
    fork_id: str
    packet_id: str
    files: dict[str, str | bytes] = field(default_factory=dict)  # the fork head's tree


@dataclass
class Fast:
    service: Service
    runtime: LocalRuntime
    clock: FakeClock
    sandbox: MockSandbox
    containers: MockContainerPort
    owner: Caller
    _names: Iterator[int] = field(default_factory=itertools.count)
    _imports: dict[str, dict[str, str | bytes]] = field(default_factory=dict)

    # --- setup --------------------------------------------------------------------------
    def project(self, require_receipt: bool, files: Mapping[str, str | bytes] | None = None) -> str:
        """A project whose canonical holds an initial import (`files`, or a README)."""
        name = f"proj-{next(self._names)}"
        created = self.service.projects.create_project(self.owner, name, require_receipt)
        project_id: str = created.project.id
        repos = self.repos(project_id)
        self._imports[project_id] = dict(files or {"README.md": "hello\n"})
        initial = commit_files(repos, self._imports[project_id])
        capability = mint_canonical_write_capability(project_id)
        assert repos.update_canonical_ref(capability, DEFAULT_BRANCH, None, initial)
        return project_id

    def agent(self, project_id: str) -> Caller:
        name = f"agent-{next(self._names)}"
        agent_id = self.service.projects.create_agent(self.owner, name).agent.id
        self.service.projects.add_member(self.owner, project_id, agent_id)
        return Caller(agent_id, "agent")

    def lane(self, project_id: str) -> Lane:
        """A member agent with a live claim on a new packet and a fork of canonical."""
        agent = self.agent(project_id)
        projects = self.service.projects
        name = f"lane-{next(self._names)}"
        fork = projects.create_fork(agent, project_id, name).fork
        packet = projects.create_packet(self.owner, project_id, name).packet
        projects.claim(agent, project_id, packet.id)
        return Lane(agent, fork.id, packet.id, dict(self._imports[project_id]))

    # --- what agents do -----------------------------------------------------------------
    def repos(self, project_id: str) -> DulwichGitStore:
        repos = self.runtime.git.store(project_id)
        assert isinstance(repos, DulwichGitStore)  # disk git: tests write objects directly
        return repos

    def push(self, project_id: str, lane: Lane, files: Mapping[str, str | bytes]) -> str:
        """Commit `files` over the fork head's and move the fork, then deliver the push
        event as the git server does (followed reviews move)."""
        repos = self.repos(project_id)
        head = repos.head(lane.fork_id)
        lane.files.update({"work.txt": f"{next(self._names)}\n", **files})
        commit = commit_files(repos, lane.files, head)
        assert repos.update_fork_ref(lane.fork_id, DEFAULT_BRANCH, head, commit)
        self.runtime.events.publish(
            PUSH_EVENT,
            {"project": project_id, "fork": lane.fork_id, "ref": DEFAULT_BRANCH, "new": commit},
        )
        return commit

    def request(self, project_id: str, lane: Lane, commit: str, follow: bool = False) -> str:
        """Request a review; the synchronous orchestrator has finished its run on return."""
        review = self.service.reviews.request(
            lane.agent, project_id, lane.packet_id, lane.fork_id, commit, follow
        ).review
        return review.id

    def reviewed(
        self, project_id: str, lane: Lane, files: Mapping[str, str | bytes]
    ) -> tuple[str, str]:
        """Push `files` and request a review of them: (commit, review id)."""
        commit = self.push(project_id, lane, files)
        return commit, self.request(project_id, lane, commit)

    # --- what owners see ----------------------------------------------------------------
    def review(self, project_id: str, review_id: str) -> dict[str, Any]:
        """The review as /state shows it to the owner."""
        reviews = self.state(project_id)["reviews"]
        return next(r for r in reviews if r["id"] == review_id)

    def state(self, project_id: str) -> dict[str, Any]:
        return wire(self.service.projects.state(self.owner, project_id))

    def stored_review(self, review_id: str) -> Review:
        review = self.runtime.store.get_review(review_id)
        assert review is not None
        return review

    def canonical(self, project_id: str) -> str | None:
        return self.repos(project_id).head()


@pytest.fixture
def fast(tmp_path: Path) -> Iterator[Fast]:
    """A fresh fast service per test (SQLite and git in `tmp_path`)."""
    clock = FakeClock()
    sandbox = MockSandbox({QUICK_FAILS: "failed"})
    containers = MockContainerPort(script={FULL_FAILS: MockRun(exit_code=1)})
    runtime = build_local_runtime(
        tmp_path / "home", clock=clock, sandbox=sandbox, containers=containers
    )
    orchestrator = SyncOrchestrator(runtime.supervisor)
    settings = ServiceSettings(claim_ttl=CLAIM_TTL, promote_wait_seconds=0.0)
    service = Service(runtime.store, runtime.git, orchestrator, clock, settings)
    promotes = LocalPromotes(service.context, runtime.journal, runtime.home / HISTORY_DIR)
    orchestrator.attach_promotes(promotes)
    runtime.events.subscribe(PUSH_EVENT, lambda detail: _follow(service, detail))
    runtime.supervisor.recovered(RUN_TIMEOUT_SECONDS)  # the scheduler admits runs after it
    principal, _ = service.projects.create_principal("owner", "owner")
    world = Fast(service, runtime, clock, sandbox, containers, Caller(principal.id, "owner"))
    try:
        yield world
    finally:
        service.shutdown()
        runtime.close()


def _follow(service: Service, detail: Mapping[str, object]) -> None:
    service.reviews.on_push(PushDetail.model_validate(detail))
