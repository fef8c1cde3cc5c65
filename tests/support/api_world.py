"""An in-process API over a local app with the mock sandbox and container port (no sockets),
a project with an owner, a member agent with a fork and a claimed packet, and reviews
written straight through the Store (fast enough to seed thousands)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.containers.mock import MockContainerPort
from forkhorse.adapters.git.disk import DiskGitHost
from forkhorse.adapters.sandbox.mock import MockSandbox
from forkhorse.api.app import ForkhorseApi
from forkhorse.api.wsgi import wsgi_event
from forkhorse.domain.model import Execution, Review
from forkhorse.domain.receipts import SummaryCheck, running_summary
from forkhorse.service.facade import Service, ServiceSettings
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.support.gitrepo import commit_files


@pytest.fixture
def mocked_local_app(tmp_path: Path) -> Iterator[LocalApp]:
    """Local mode with the mock sandbox and container port: nothing here runs a check."""
    runtime = build_local_runtime(tmp_path, sandbox=MockSandbox(), containers=MockContainerPort())
    local = build_local_app(runtime, ServiceSettings())
    yield local
    local.close()


def api_event(method: str, path: str, token: str, body: bytes = b"") -> dict[str, Any]:
    """`path` may carry a query string."""
    path, _, query = path.partition("?")
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "HTTP_HOST": "127.0.0.1:8787",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "CONTENT_TYPE": "application/json",
        "wsgi.url_scheme": "http",
    }
    return wsgi_event(environ, body)


@dataclass
class ApiWorld:
    service: Service
    api: ForkhorseApi
    owner_token: str
    agent_token: str
    agent_id: str
    ids: dict[str, str]

    def call(self, method: str, path: str, token: str | None = None) -> tuple[int, Any]:
        response = self.api.handle(api_event(method, path, token or self.owner_token))
        return response["statusCode"], json.loads(response["body"])

    def new_packet(self, title: str) -> str:
        owner = self.service.authenticate(self.owner_token)
        assert owner is not None
        return self.service.projects.create_packet(owner, self.ids["project"], title).packet.id

    def seed_reviews(
        self, count: int, *, packet: str | None = None, prefix: str = "review"
    ) -> list[str]:
        """`count` reviews of one packet from the agent's fork, each with a running
        three-check summary, oldest first (a packet's newest review is its active one)."""
        store, now = self.service.context.store, self.service.context.clock.now()
        checks = [
            SummaryCheck(name=f"c{i}", tier="full", outcome="running", duration_ms=None)
            for i in range(3)
        ]
        summary = running_summary("review-created", now).model_copy(update={"checks": checks})
        ids = [f"{prefix}-{index:05d}" for index in range(count)]
        for index, review_id in enumerate(ids):
            assert store.create_review(
                Review(
                    id=review_id,
                    project_id=self.ids["project"],
                    packet_id=packet or self.ids["packet"],
                    fork_id=self.ids["fork"],
                    agent_id=self.agent_id,
                    commit=self.ids["commit"],
                    created_at=now + timedelta(microseconds=index),
                    execution=Execution(
                        generation=f"g-{review_id}",
                        commit=self.ids["commit"],
                        trigger="review-created",
                        summary=summary,
                    ),
                )
            )
        return ids


def api_world(service: Service, git: DiskGitHost) -> ApiWorld:
    """An owner, a project, a member agent with a fork at a commit and a claimed packet,
    behind the API over `service` (whichever Store it has)."""
    _, owner_token = service.projects.create_principal("owner", "owner")
    owner = service.authenticate(owner_token)
    assert owner is not None
    project = service.projects.create_project(owner, "bench", True).project
    created = service.projects.create_agent(owner, "agent")
    agent = service.authenticate(created.token)
    assert agent is not None
    service.projects.add_member(owner, project.id, agent.id)
    fork = service.projects.create_fork(agent, project.id, "fork").fork
    packet = service.projects.create_packet(owner, project.id, "work").packet
    service.projects.claim(agent, project.id, packet.id)
    repos = git.store(project.id)
    commit = commit_files(repos, {"README.md": "bench\n"})
    assert repos.update_fork_ref(fork.id, "refs/heads/main", None, commit)
    ids = {"project": project.id, "fork": fork.id, "packet": packet.id, "commit": commit}
    return ApiWorld(service, ForkhorseApi(service), owner_token, created.token, agent.id, ids)


def local_api_world(app: LocalApp) -> ApiWorld:
    return api_world(app.service, app.runtime.git)
