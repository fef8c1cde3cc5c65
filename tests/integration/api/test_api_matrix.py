"""Every route against every role: anonymous, owner, another owner, the fork's owner agent,
a member agent that does not own the fork, and a non-member agent. Plus CSRF and JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import requests

from tests.support.live import Server, new_lane, new_project

ROLES = ("anonymous", "owner", "other_owner", "fork_agent", "member_agent", "outsider_agent")
FLOW_RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}


@dataclass
class World:
    server: Server
    tokens: dict[str, str | None]
    ids: dict[str, str]


@pytest.fixture(scope="module")
def world(server: Server) -> World:
    project = new_project(server, False)
    lane = new_lane(project, "fork-owner")
    member, _ = project.agent("member")
    outsider = server.owner.ok("POST", "/agents", {"name": "outsider"}, expect=201)
    spare = server.owner.ok("POST", "/agents", {"name": "spare"}, expect=201)
    # A commit past canonical: promoting canonical's own head is refused as a no-op.
    commit, review = lane.reviewed({"NOTES.md": "the matrix review\n"})
    return World(
        server,
        {
            "anonymous": None,
            "owner": server.owner_token,
            "other_owner": server.new_owner().token,
            "fork_agent": lane.agent.token,
            "member_agent": member.token,
            "outsider_agent": outsider["token"],
        },
        {
            "project": project.id,
            "packet": lane.packet,
            "free_packet": project.packet("unclaimed"),
            "fork": lane.fork["id"],
            "review": review["id"],
            "commit": commit,
            "spare": spare["agent"]["id"],
        },
    )


P = "/projects/{project}"
R = P + "/reviews/{review}"
# (method, path, body, {role: status}); roles not listed expect the route's default.
ROUTES: list[tuple[str, str, Any, dict[str, int]]] = [
    ("POST", "/projects", {"name": "x"}, {"owner": 201, "other_owner": 201}),
    # Owners list their own projects, agents their memberships (none for an outsider).
    ("GET", "/projects", None, {**dict.fromkeys(ROLES, 200), "anonymous": 401}),
    ("PATCH", P + "/settings", {"requireReceipt": False}, {"owner": 200, "other_owner": 404}),
    ("PUT", P + "/policy", {"protectChecks": False}, {"owner": 200, "other_owner": 404}),
    (
        "GET",
        P + "/state",
        None,
        {"owner": 200, "other_owner": 404, "fork_agent": 200, "member_agent": 200},
    ),
    (
        "GET",
        P + "/reviews",
        None,
        {"owner": 200, "other_owner": 404, "fork_agent": 200, "member_agent": 200},
    ),
    ("POST", "/agents", {"name": "a"}, {"owner": 201, "other_owner": 201}),
    ("DELETE", "/agents/agent-unknown", None, {"owner": 404, "other_owner": 404}),
    ("POST", P + "/members", {"agentId": "{spare}"}, {"owner": 201, "other_owner": 404}),
    ("POST", P + "/forks", {"name": "f"}, {"fork_agent": 201, "member_agent": 201}),
    ("POST", P + "/packets", {"title": "t"}, {"owner": 201, "other_owner": 404}),
    (
        "GET",
        P + "/packets",
        None,
        {"owner": 200, "other_owner": 404, "fork_agent": 200, "member_agent": 200},
    ),
    ("POST", P + "/packets/{packet}/claim", None, {"fork_agent": 201, "member_agent": 409}),
    ("DELETE", P + "/packets/{free_packet}/claim", None, {"fork_agent": 404, "member_agent": 404}),
    (
        "POST",
        P + "/reviews",
        {"packetId": "{packet}", "forkId": "{fork}", "commit": "{commit}"},
        {"fork_agent": 202, "member_agent": 403},
    ),
    ("GET", R + "/receipt", None, {"owner": 404, "other_owner": 404}),
    ("POST", R + "/approve", {"commit": "{commit}"}, {"owner": 200, "other_owner": 404}),
    ("POST", R + "/promote", {"commit": "{commit}"}, {"owner": 200, "other_owner": 404}),
    ("GET", R + "/promotion", None, {"owner": 200, "other_owner": 404}),
    ("GET", R + "/gate", None, {"owner": 200, "other_owner": 404}),
    ("GET", R + "/history", None, {"owner": 200, "other_owner": 404}),
    ("POST", R + "/review-receipts", FLOW_RECEIPT, {"fork_agent": 201, "member_agent": 403}),
    (
        "GET",
        R + "/review-receipts",
        None,
        {"owner": 200, "other_owner": 404, "fork_agent": 200, "member_agent": 200},
    ),
    # The review declares no checks: no record, so nothing signed; only its agent may ask.
    (
        "GET",
        R + "/attestation",
        None,
        {"owner": 404, "other_owner": 404, "fork_agent": 404, "member_agent": 403},
    ),
    (
        "GET",
        P + "/ledger/unknown",
        None,
        {"owner": 404, "other_owner": 404, "fork_agent": 404, "member_agent": 404},
    ),
    (
        "GET",
        P + "/promotions/unknown/attestation",
        None,
        {"owner": 404, "other_owner": 404, "fork_agent": 404, "member_agent": 404},
    ),
    ("GET", "/keys", None, dict.fromkeys(ROLES, 200)),
    ("GET", "/openapi.json", None, dict.fromkeys(ROLES, 200)),
    ("GET", "/docs", None, dict.fromkeys(ROLES, 200)),
]


def _default(role: str) -> int:
    return 401 if role == "anonymous" else 403


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {key: _fill(item, ids) for key, item in value.items()}
    return value


@pytest.mark.parametrize("role", ROLES)
def test_every_route_answers_each_role(world: World, role: str) -> None:
    client = world.server.client(world.tokens[role])
    seen, expected = {}, {}
    for method, path, body, table in ROUTES:
        key = f"{method} {path}"
        status, payload = client.call(method, _fill(path, world.ids), _fill(body, world.ids))
        seen[key] = status
        expected[key] = table.get(role, _default(role))
        if status >= 400 and not path.startswith(("/openapi", "/docs")):
            assert set(payload) <= {"error", "reasons"}, payload
            assert isinstance(payload["error"], str), payload
    assert seen == expected


def test_a_cross_origin_post_is_refused_and_changes_nothing(world: World) -> None:
    owner = world.server.owner
    before = owner.ok("GET", "/projects")
    status, body = owner.call(
        "POST", "/projects", {"name": "csrf"}, headers={"Origin": "http://evil.example"}
    )
    assert (status, body) == (403, {"error": "Cross-origin requests are refused."})
    assert owner.ok("GET", "/projects") == before
    status, _ = owner.call(
        "POST", "/projects", {"name": "same"}, headers={"Origin": world.server.url}
    )
    assert status == 201


def test_a_non_json_post_is_refused(world: World) -> None:
    owner = world.server.owner
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        status, body = owner.call(
            "POST", "/projects", {"name": "form"}, headers={"Content-Type": content_type}
        )
        assert (status, body) == (415, {"error": "Content-Type must be application/json."})


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"requireReceipt": True, "extra": 1}, "Unknown field: extra."),
        ({"requireReceipt": "yes"}, "Invalid requireReceipt: Input should be a valid boolean."),
        ({}, "Missing field: requireReceipt."),
    ],
)
def test_settings_accept_exactly_one_boolean(world: World, body: Any, error: str) -> None:
    path = f"/projects/{world.ids['project']}/settings"
    assert world.server.owner.call("PATCH", path, body) == (400, {"error": error})


@pytest.mark.parametrize(
    "body",
    [{"requireReceipt": True, "protectChecks": True}, {"protectChecks": True}],
)
def test_settings_still_refuse_the_policy_field(world: World, body: Any) -> None:
    path = f"/projects/{world.ids['project']}"
    before = world.server.owner.state(world.ids["project"])["project"]
    status, refused = world.server.owner.call("PATCH", path + "/settings", body)
    assert status == 400
    assert refused["error"] in ("Unknown field: protectChecks.", "Missing field: requireReceipt.")
    assert world.server.owner.state(world.ids["project"])["project"] == before


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"protectChecks": True, "extra": 1}, "Unknown field: extra."),
        ({"protectChecks": True, "requireReceipt": True}, "Unknown field: requireReceipt."),
        ({"protectChecks": 1}, "Invalid protectChecks: Input should be a valid boolean."),
        ({"protectChecks": "true"}, "Invalid protectChecks: Input should be a valid boolean."),
        ({}, "Missing field: protectChecks."),
    ],
)
def test_policy_accepts_exactly_one_boolean(world: World, body: Any, error: str) -> None:
    path = f"/projects/{world.ids['project']}/policy"
    before = world.server.owner.state(world.ids["project"])["project"]["policy"]
    assert world.server.owner.call("PUT", path, body) == (400, {"error": error})
    assert world.server.owner.state(world.ids["project"])["project"]["policy"] == before


def test_policy_of_an_unknown_project_is_404(world: World) -> None:
    status, body = world.server.owner.call("PUT", "/projects/ghost/policy", {"protectChecks": True})
    assert (status, body) == (404, {"error": "Project not found."})


def test_hostile_bodies_get_clear_400s(world: World) -> None:
    owner = world.server.owner
    sent = requests.post(
        world.server.url + "/projects",
        data=b"{not json",
        headers={"Authorization": f"Bearer {owner.token}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert (sent.status_code, sent.json()) == (400, {"error": "The body is not valid JSON."})
    status, body = owner.call("POST", "/projects", {"name": "x" * 101})
    assert status == 400
    status, body = owner.call(
        "POST",
        f"/projects/{world.ids['project']}/reviews/{world.ids['review']}/approve",
        {"commit": "HEAD"},
    )
    assert status == 400
    assert body["error"].startswith("Invalid commit")


def test_a_revoked_agent_token_stops_working(world: World) -> None:
    owner = world.server.owner
    created = owner.ok("POST", "/agents", {"name": "gone"}, expect=201)
    agent = world.server.client(created["token"])
    assert agent.call("GET", f"/projects/{world.ids['project']}/state")[0] == 403
    owner.ok("DELETE", f"/agents/{created['agent']['id']}")
    status, body = agent.call("GET", f"/projects/{world.ids['project']}/state")
    assert (status, body) == (401, {"error": "The token is unknown or revoked."})


def test_tokens_are_stored_only_as_hashes(world: World) -> None:
    home = world.server.app.runtime.home
    database = b"".join(path.read_bytes() for path in home.glob("forkhorse.sqlite3*"))
    for token in world.tokens.values():
        if token:
            assert token.encode() not in database
