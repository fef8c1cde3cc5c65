"""A live Forkhorse on loopback for tests: waitress on 127.0.0.1, SQLite, disk git and the
local runner, with an owner token; projects with an initial import, and agent lanes (an
agent, a claimed packet and a fork) that push with the real git CLI.

The `server` fixture (one live Forkhorse per test module, with real bubblewrap quick checks
and real podman full checks on the busybox test image) and the `required` and `advisory`
projects are registered for every suite by tests/conftest.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.containers.images import ImageRegistry
from forkhorse.service.approvals import GATE_REFUSED
from forkhorse.service.facade import ServiceSettings
from forkhorse.service.promote.rules import CONSENT_MISSING
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.integration.api.support import Client, ShiftClock, Worktree, checks_files
from tests.support.wsgi import LoopbackWsgi

CLAIM_TTL = timedelta(minutes=30)
PROMOTE_WAIT_SECONDS = 4.0


@dataclass
class Server:
    url: str
    app: LocalApp
    clock: ShiftClock
    owner_token: str
    workdir: Path
    home: Path
    registry: ImageRegistry
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def owner(self) -> Client:
        return Client(self.url, self.owner_token)

    def client(self, token: str | None) -> Client:
        return Client(self.url, token)

    def new_owner(self) -> Client:
        _, token = self.app.service.projects.create_principal("owner", "other-owner")
        return self.client(token)

    def worktree(self) -> Worktree:
        return Worktree(self.workdir / f"work-{next(self._names)}")

    def restart(self) -> None:
        """Stop the app and build a fresh one over the same home, as a process restart
        would (tokens, projects, records and repositories persist); the listener stays."""
        self.app.close()
        self.app = _build_app(self.home, self.registry, self.clock, self.url)

    def stop(self) -> None:
        self.app.close()
        self.app.runtime.deps.containers.cleanup_orphans(frozenset())


def _build_app(home: Path, registry: ImageRegistry, clock: ShiftClock, url: str) -> LocalApp:
    runtime = build_local_runtime(home, clock=clock, images=registry)
    settings = ServiceSettings(
        public_url=url, claim_ttl=CLAIM_TTL, promote_wait_seconds=PROMOTE_WAIT_SECONDS
    )
    return build_local_app(runtime, settings)


def start_server(home: Path, registry: ImageRegistry) -> tuple[Server, Callable[[], None]]:
    """A server on an ephemeral loopback port; call the returned function to stop it."""
    clock = ShiftClock()
    holder: dict[str, Server] = {}
    listener = LoopbackWsgi(lambda environ, start: holder["server"].app.http(environ, start), 8)
    app = _build_app(home, registry, clock, listener.url)
    _, owner_token = app.service.projects.create_principal("owner", "owner")
    live = Server(listener.url, app, clock, owner_token, home / "work", home, registry)
    holder["server"] = live
    listener.start()

    def stop() -> None:
        listener.stop()
        live.stop()

    return live, stop


@dataclass
class Project:
    """A project with an initial import on canonical, ready for agents."""

    server: Server
    id: str
    canonical_url: str
    base: Worktree
    initial: str

    def agent(self, name: str = "agent") -> tuple[Client, str]:
        created = self.server.owner.ok("POST", "/agents", {"name": name}, expect=201)
        agent_id = created["agent"]["id"]
        self.server.owner.ok(
            "POST", f"/projects/{self.id}/members", {"agentId": agent_id}, expect=201
        )
        return self.server.client(created["token"]), agent_id

    def packet(self, title: str = "work") -> str:
        created = self.server.owner.ok(
            "POST", f"/projects/{self.id}/packets", {"title": title}, expect=201
        )
        return str(created["packet"]["id"])

    def review_path(self, review_id: str) -> str:
        return f"/projects/{self.id}/reviews/{review_id}"

    def approve(self, review_id: str, commit: str, accept: bool | None = None) -> tuple[int, Any]:
        """The owner approves `commit`; `accept` answers a checks change, if given."""
        body: dict[str, Any] = {"commit": commit}
        if accept is not None:
            body["acceptChecksChange"] = accept
        return self.server.owner.call("POST", f"{self.review_path(review_id)}/approve", body)

    def refused_until_accepted(self, review_id: str, commit: str, reasons: list[str]) -> Any:
        """A checks change: approve is refused with `reasons` (unless accepted), promote
        without that consent is refused and canonical stays; then the owner accepts it.
        The accepting approval."""
        owner = self.server.owner
        for refused_body in (None, False):
            status, refused = self.approve(review_id, commit, refused_body)
            assert (status, refused) == (409, {"error": GATE_REFUSED, "reasons": reasons})
        status, body = owner.promote(self.id, review_id, commit)
        assert (status, body["error"]) == (409, CONSENT_MISSING)
        assert owner.state(self.id)["project"]["canonicalHead"] == self.initial
        status, approved = self.approve(review_id, commit, True)
        assert status == 200, approved
        return approved


@dataclass
class Lane:
    """One agent working one packet on its own fork."""

    project: Project
    agent: Client
    agent_id: str
    packet: str
    fork: dict[str, Any]
    tree: Worktree

    def push(self, files: dict[str, str], message: str = "change") -> str:
        commit = self.tree.commit(files, message)
        assert self.agent.token is not None
        self.tree.push(self.fork["cloneUrl"], self.agent.token)
        return commit

    def request_review(self, commit: str, follow: bool = False) -> dict[str, Any]:
        body = {"packetId": self.packet, "forkId": self.fork["id"], "commit": commit}
        if follow:
            body["followPushes"] = True
        created = self.agent.ok("POST", f"/projects/{self.project.id}/reviews", body, 202)
        return created["review"]  # type: ignore[no-any-return]

    def reviewed(self, files: dict[str, str]) -> tuple[str, dict[str, Any]]:
        """Push `files`, request a review and wait for its receipt."""
        commit = self.push(files)
        review = self.request_review(commit)
        owner = self.project.server.owner
        return commit, owner.wait_receipt(self.project.id, review["id"])


def new_project(server: Server, require_receipt: bool) -> Project:
    body = {"name": "proj", "requireReceipt": require_receipt}
    project = server.owner.ok("POST", "/projects", body, expect=201)["project"]
    base = server.worktree()
    initial = base.commit({"README.md": "hello\n"}, "initial import")
    base.push(project["cloneUrl"], server.owner_token)
    return Project(server, project["id"], project["cloneUrl"], base, initial)


def new_lane(project: Project, name: str = "agent") -> Lane:
    agent, agent_id = project.agent(name)
    packet = project.packet()
    agent.ok("POST", f"/projects/{project.id}/packets/{packet}/claim", expect=201)
    fork = agent.ok("POST", f"/projects/{project.id}/forks", {"name": name}, expect=201)["fork"]
    tree = project.server.worktree()
    assert agent.token is not None
    tree.git(agent.token, "pull", "-q", fork["cloneUrl"], "main")
    return Lane(project, agent, agent_id, packet, fork, tree)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    busybox_ref: str,
) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("forkhorse")
    registry = ImageRegistry(home / "images")
    registry.record("busybox", busybox_ref)
    live, stop = start_server(home / "home", registry)
    yield live
    stop()


GUARDED_MODULE = ".forkhorse/quick/ok.py"
# A project's own quick check (its bytes matter to the protected-checks policy).
GUARD = (
    "def check(ctx):\n"
    "    # The project's real check (the bytes matter here, not what it asserts).\n"
    "    return {'ok': True, 'message': 'Guarded.'}\n"
)


def new_guarded_project(
    server: Server, require_receipt: bool = True, protect_checks: bool = True
) -> Project:
    """A project whose canonical head declares one quick check (`GUARD`); the
    protected-checks policy is turned on when asked, and otherwise left at its default."""
    body = {"name": "guarded", "requireReceipt": require_receipt}
    project = server.owner.ok("POST", "/projects", body, expect=201)["project"]
    base = server.worktree()
    initial = base.commit({**checks_files(), GUARDED_MODULE: GUARD, "README.md": "hi\n"}, "import")
    base.push(project["cloneUrl"], server.owner_token)
    if protect_checks:
        wanted = {"protectChecks": True}
        policy = server.owner.ok("PUT", f"/projects/{project['id']}/policy", wanted)
        assert policy == {"policy": wanted}
    return Project(server, project["id"], project["cloneUrl"], base, initial)


@pytest.fixture
def required(server: Server) -> Project:
    return new_project(server, True)


@pytest.fixture
def advisory(server: Server) -> Project:
    return new_project(server, False)
