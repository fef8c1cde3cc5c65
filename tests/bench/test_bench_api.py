"""API benchmarks, in process (no sockets): `GET /state` over 1,000 reviews, and a review
request's time to its 202. Each prints its figure and a ratio against a bare baseline."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from forkhorse.adapters.containers.mock import MockContainerPort
from forkhorse.adapters.sandbox.mock import MockSandbox
from forkhorse.api.wsgi import wsgi_event
from forkhorse.domain.model import Execution, Review
from forkhorse.domain.receipts import SummaryCheck, running_summary
from forkhorse.service import ServiceSettings
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

from tests.support.gitrepo import commit_files

REVIEWS = 1_000
pytestmark = pytest.mark.bench


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LocalApp]:
    runtime = build_local_runtime(tmp_path, sandbox=MockSandbox(), containers=MockContainerPort())
    local = build_local_app(runtime, ServiceSettings())
    yield local
    local.close()


def _event(method: str, path: str, token: str, body: bytes = b"") -> dict[str, Any]:
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "HTTP_HOST": "127.0.0.1:8787",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "CONTENT_TYPE": "application/json",
        "wsgi.url_scheme": "http",
    }
    return wsgi_event(environ, body)


def _timed(action: Any, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def _world(app: LocalApp) -> tuple[str, str, dict[str, Any]]:
    service = app.service
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
    repos = app.runtime.git.store(project.id)
    commit = commit_files(repos, {"README.md": "bench\n"})
    assert repos.update_fork_ref(fork.id, "refs/heads/main", None, commit)
    ids = {"project": project.id, "fork": fork.id, "packet": packet.id, "commit": commit}
    return owner_token, created.token, ids


def test_state_with_1000_reviews(app: LocalApp) -> None:
    owner_token, _, ids = _world(app)
    store, now = app.runtime.store, app.runtime.deps.clock.now()
    checks = [
        SummaryCheck(name=f"c{i}", tier="full", outcome="running", duration_ms=None)
        for i in range(3)
    ]
    summary = running_summary("review-created", now).model_copy(update={"checks": checks})
    for index in range(REVIEWS):
        store.create_review(
            Review(
                id=f"review-{index:04d}",
                project_id=ids["project"],
                packet_id=ids["packet"],
                fork_id=ids["fork"],
                agent_id="agent",
                commit=ids["commit"],
                created_at=now,
                execution=Execution(
                    generation=f"g{index}",
                    commit=ids["commit"],
                    trigger="review-created",
                    summary=summary,
                ),
            )
        )
    event = _event("GET", f"/projects/{ids['project']}/state", owner_token)
    response = app.api.handle(event)
    assert response["statusCode"] == 200
    samples = _timed(lambda: app.api.handle(event), 20)
    baseline = _timed(lambda: store.list_reviews(ids["project"]), 20)
    median, bare = statistics.median(samples), statistics.median(baseline)
    print(
        f"\nGET /state, {REVIEWS} reviews: median {median * 1000:.1f} ms per request; "
        f"Store.list_reviews alone {bare * 1000:.1f} ms (ratio {median / bare:.1f}x)"
    )
    assert median < 2.0


def test_review_request_time_to_202(app: LocalApp) -> None:
    _, agent_token, ids = _world(app)
    body = (
        f'{{"packetId":"{ids["packet"]}","forkId":"{ids["fork"]}","commit":"{ids["commit"]}"}}'
    ).encode()
    path = f"/projects/{ids['project']}/reviews"

    def request() -> None:
        response = app.api.handle(_event("POST", path, agent_token, body))
        assert response["statusCode"] == 202, response

    samples = _timed(request, 30)
    # Baseline: the cheapest authenticated round trip through the same guards and resolver.
    trivial = _event("GET", f"/projects/{ids['project']}/review-missing", agent_token)
    baseline = _timed(lambda: app.api.handle(trivial), 30)
    median, bare = statistics.median(samples), statistics.median(baseline)
    print(
        f"\nPOST /reviews to 202: median {median * 1000:.1f} ms; "
        f"an authenticated 404 {bare * 1000:.1f} ms (ratio {median / bare:.1f}x)"
    )
    assert median < 1.0
