"""The routing context is per request: two callers routed at the same moment each act as
themselves (the caller the guards put in the context never leaks to another thread)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
from forkhorse.api.guards import caller_of
from forkhorse.api.routes import projects as routes
from forkhorse.service.context import ServiceSettings
from forkhorse.service.identity import Caller
from forkhorse.wiring.local import LocalApp, build_local_app, build_local_runtime

WAIT_SECONDS = 30


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LocalApp]:
    local = build_local_app(build_local_runtime(tmp_path), ServiceSettings())
    yield local
    local.close()


def _get(path: str, token: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"authorization": f"Bearer {token}"},
        "requestContext": {"http": {"method": "GET", "path": path}, "stage": "$default"},
        "isBase64Encoded": False,
    }


def test_concurrent_callers_each_see_their_own_identity(
    app: LocalApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    projects = app.service.projects
    owner, owner_token = projects.create_principal("owner", "owner")
    _, agent_token = projects.create_principal("agent", "agent")
    # The owner lists its project; the agent, a member of none, lists nothing.
    mine = projects.create_project(Caller(owner.id, "owner"), "mine", True).project.id
    both_authenticated = threading.Barrier(2, timeout=WAIT_SECONDS)

    def caller_once_both_are_authenticated(router: BaseRouter) -> Caller:
        both_authenticated.wait()  # both requests passed the guards, both callers are set
        return caller_of(router)

    monkeypatch.setattr(routes, "caller_of", caller_once_both_are_authenticated)
    answers: dict[str, dict[str, Any]] = {}

    def call(name: str, token: str) -> None:
        answers[name] = app.api.handle(_get("/projects", token))

    threads = [
        threading.Thread(target=call, args=("owner", owner_token)),
        threading.Thread(target=call, args=("agent", agent_token)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)
    assert answers["owner"]["statusCode"] == 200
    assert [p["id"] for p in json.loads(answers["owner"]["body"])["projects"]] == [mine]
    assert answers["agent"]["statusCode"] == 200, answers["agent"]
    assert json.loads(answers["agent"]["body"]) == {"projects": []}
