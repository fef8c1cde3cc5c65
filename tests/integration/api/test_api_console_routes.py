"""The console's read-only owner routes (the gate now, the run's history) and the console's
files and sign-in configuration, over HTTP against the live server with real checks."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
from forkhorse import console
from forkhorse.adapters.step_functions import StepFunctionsOrchestrator
from forkhorse.ports.orchestrator import NamesExecutions
from forkhorse.service.identity import Caller
from forkhorse.service.inspection import Inspection

from tests.integration.api.support import PASSING
from tests.support.live import Project, Server, new_lane

MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:ReceiptRun"


def _path(project: Project, review_id: str, tail: str) -> str:
    return f"/projects/{project.id}/reviews/{review_id}/{tail}"


def test_the_gate_lists_what_approve_and_promote_would_refuse_then_allows_them(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    commit, review = lane.reviewed(PASSING)
    owner = server.owner
    gate = owner.ok("GET", _path(required, review["id"], "gate"))
    checks = gate.pop("checks")
    assert gate == {
        "mode": "required",
        "commit": commit,
        "approve": {"allowed": True, "reasons": []},
        "promote": {
            "allowed": False,
            "reasons": ["consent: The owner has not approved this review."],
        },
    }
    # Canonical declares no checks: the commit's are added, shown, and protect nothing.
    assert (checks["policy"], checks["enforced"], checks["canonicalHead"]) == (
        {"protectChecks": False},
        False,
        required.initial,
    )
    assert [(d["check"], d["change"], d["protected"]) for d in checks["diff"]] == [
        ("quick", "added", False),
        ("full-0", "added", False),
    ]
    owner.ok("POST", _path(required, review["id"], "approve"), {"commit": commit})
    gate = owner.ok("GET", _path(required, review["id"], "gate"))
    assert gate["approve"] == {"allowed": False, "reasons": ["This commit is already approved."]}
    assert gate["promote"] == {"allowed": True, "reasons": []}


def test_the_history_is_the_local_supervisors_step_functions_shaped_events(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    _, review = lane.reviewed(PASSING)
    history = server.owner.ok("GET", _path(required, review["id"], "history"))
    assert (history["source"], history["executionArn"], history["consoleUrl"]) == (
        "local",
        None,
        None,
    )
    events = history["events"]
    assert events[0]["type"] == "ExecutionStarted"
    assert events[-1]["type"] == "ExecutionSucceeded"
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
    ]
    assert entered[0] == "Prepare"
    assert "QuickGate" in entered
    assert entered[-1] == "Finalize"
    iterations = [
        e["mapIterationStartedEventDetails"]
        for e in events
        if "mapIterationStartedEventDetails" in e
    ]
    assert iterations == [{"name": "QuickChecks", "index": 0}, {"name": "FullChecks", "index": 0}]


class _Pages:
    """A Step Functions client answering GetExecutionHistory in two pages."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def get_execution_history(self, **arguments: Any) -> dict[str, Any]:
        self.asked.append(arguments)
        stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        if "nextToken" not in arguments:
            return {
                "events": [{"id": 1, "type": "ExecutionStarted", "timestamp": stamp}],
                "nextToken": "t",
            }
        return {"events": [{"id": 2, "type": "ExecutionSucceeded", "timestamp": stamp}]}


def test_on_aws_the_history_names_the_execution_and_links_the_console(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    _, review = lane.reviewed(PASSING)
    client = _Pages()
    orchestrator = StepFunctionsOrchestrator(client, MACHINE)  # type: ignore[arg-type]
    assert isinstance(orchestrator, NamesExecutions)
    service = server.app.service
    context = dataclasses.replace(service.context, orchestrator=orchestrator)
    inspection = Inspection(context, service.approvals, service.promotions)
    owner = service.authenticate(server.owner_token)
    assert isinstance(owner, Caller)
    history = inspection.history(owner, required.id, review["id"])
    generation = client.asked[0]["executionArn"].rsplit(":", 1)[1]
    arn = f"arn:aws:states:eu-west-1:123456789012:execution:ReceiptRun:{generation}"
    assert history.model_dump(mode="json") == {
        "source": "step-functions",
        "executionArn": arn,
        "consoleUrl": "https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1"
        f"#/v2/executions/details/{arn}",
        "events": [
            {"id": 1, "type": "ExecutionStarted", "timestamp": "2026-01-02T03:04:05+00:00"},
            {"id": 2, "type": "ExecutionSucceeded", "timestamp": "2026-01-02T03:04:05+00:00"},
        ],
        "promote": None,  # the review was never promoted
    }


@pytest.mark.parametrize("tail", ["gate", "history"])
def test_the_console_routes_are_owner_only(server: Server, required: Project, tail: str) -> None:
    lane = new_lane(required, f"role-{tail}")
    review = lane.request_review(required.initial)
    path = _path(required, review["id"], tail)
    assert server.client(None).call("GET", path)[0] == 401
    assert lane.agent.call("GET", path)[0] == 403
    assert server.new_owner().call("GET", path)[0] == 404
    assert server.owner.call("GET", _path(required, "review-unknown", tail)) == (
        404,
        {"error": "Review not found."},
    )
    assert server.owner.call("GET", f"/projects/nope/reviews/{review['id']}/{tail}")[0] == 404
    server.owner.wait_receipt(required.id, review["id"])


def test_the_console_routes_are_described_in_openapi(server: Server) -> None:
    paths = requests.get(server.url + "/openapi.json", timeout=30).json()["paths"]
    for tail in ("gate", "history"):
        assert "get" in paths[f"/projects/{{project_id}}/reviews/{{review_id}}/{tail}"]


def test_the_console_is_served_without_credentials_and_its_api_calls_are_not(
    server: Server,
) -> None:
    page = requests.get(server.url + "/", timeout=30)
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert 'src="/console/app.js"' in page.text
    script = requests.get(server.url + "/console/app.js", timeout=30)
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert "frame-ancestors 'none'" in script.headers["Content-Security-Policy"]
    assert requests.get(server.url + "/console/config.json", timeout=30).json() == {"auth": "token"}
    for hostile in ("/console/__init__.py", "/console/../api/app.py", "/console/.hidden.js"):
        assert requests.get(server.url + hostile, timeout=30).status_code in (401, 404)
    assert requests.post(server.url + "/console/app.js", timeout=30).status_code != 200
    assert requests.get(server.url + "/projects", timeout=30).status_code == 401


def test_the_console_signs_owners_in_with_cognito_when_the_deployment_names_it() -> None:
    assert console.config() == {"auth": "token"}
    assert console.config("https://x.auth.eu-west-1.amazoncognito.com/") == {"auth": "token"}
    assert console.config("https://x.auth.eu-west-1.amazoncognito.com/", "client123") == {
        "auth": "cognito",
        "cognito": {
            "domain": "https://x.auth.eu-west-1.amazoncognito.com",
            "clientId": "client123",
            "scopes": ["openid", "email"],
        },
    }
