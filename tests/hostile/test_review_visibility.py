"""Issue 28, visibility: a review an agent may not see (another agent's, not yet on
canonical) reads as unknown on every route that names a review, for every identity that may
not see it. The routes are taken from the served OpenAPI document, so a new route that
names a review is tried here without anyone listing it.

For each such route and identity, the answer about the hidden review must be the answer
about a review that does not exist: same status, same body. An agent sees another agent's
review once its commit is on canonical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import requests

from tests.support.live import Server, new_lane, new_project

REVIEW_PARAMETER = "{review_id}"
UNKNOWN_REVIEW = "00000000-0000-4000-8000-000000000000"
FLOW_RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}
# A well-formed body for each route that takes one (keyed by method and last segment), so
# the request reaches the review's lookup instead of stopping at validation.
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "approve"): {"commit": "{commit}"},
    ("POST", "promote"): {"commit": "{commit}"},
    ("POST", "review-receipts"): FLOW_RECEIPT,
}
BLIND = ("member", "outsider", "other_owner", "anonymous")


@dataclass
class World:
    server: Server
    project: str
    tokens: dict[str, str | None]
    hidden: str
    hidden_commit: str
    published: str


@pytest.fixture(scope="module")
def world(server: Server) -> World:
    project = new_project(server, False)
    author = new_lane(project, "author")
    member, _ = project.agent("member")
    outsider = server.owner.ok("POST", "/agents", {"name": "outsider"}, expect=201)
    published_commit, published = author.reviewed({"NOTES.md": "promoted\n"})
    path = f"/projects/{project.id}/reviews/{published['id']}"
    server.owner.ok("POST", f"{path}/approve", {"commit": published_commit})
    server.owner.ok("POST", f"{path}/promote", {"commit": published_commit})
    hidden_commit, hidden = author.reviewed({"NOTES.md": "unpublished work\n"})
    return World(
        server,
        project.id,
        {
            "author": author.agent.token,
            "owner": server.owner_token,
            "member": member.token,
            "outsider": outsider["token"],
            "other_owner": server.new_owner().token,
            "anonymous": None,
        },
        hidden["id"],
        hidden_commit,
        published["id"],
    )


def _review_routes(server: Server) -> list[tuple[str, str]]:
    document = requests.get(server.url + "/openapi.json", timeout=60).json()
    return [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        if REVIEW_PARAMETER in path
        for method in operations
    ]


def _ask(world: World, role: str, method: str, path: str, review: str) -> tuple[int, Any]:
    filled = path.replace("{project_id}", world.project).replace(REVIEW_PARAMETER, review)
    body = BODIES.get((method, path.rsplit("/", 1)[-1]))
    if method != "GET":
        assert body is not None, f"{method} {path}: add a well-formed body to BODIES"
        body = {k: v.format(commit=world.hidden_commit) for k, v in body.items()}
    return world.server.client(world.tokens[role]).call(method, filled, body)


def test_the_route_table_names_reviews(world: World) -> None:
    review = f"/projects/{{project_id}}/reviews/{REVIEW_PARAMETER}"
    known = {("GET", review), ("GET", review + "/review-receipts"), ("POST", review + "/approve")}
    assert known <= set(_review_routes(world.server))


@pytest.mark.parametrize("role", BLIND)
def test_a_hidden_review_reads_as_unknown_on_every_route(world: World, role: str) -> None:
    differs = {}
    for method, path in _review_routes(world.server):
        hidden = _ask(world, role, method, path, world.hidden)
        unknown = _ask(world, role, method, path, UNKNOWN_REVIEW)
        if hidden != unknown:
            differs[f"{method} {path}"] = {"hidden": hidden, "unknown": unknown}
    assert differs == {}


@pytest.mark.parametrize("route", ["", "/review-receipts"])
def test_those_who_may_see_a_review_read_it(world: World, route: str) -> None:
    path = f"/projects/{world.project}/reviews/{{review}}{route}"
    seen = {
        (role, review): world.server.client(world.tokens[role]).call(
            "GET", path.format(review=review)
        )[0]
        for role in ("owner", "author", "member")
        for review in (world.hidden, world.published)
    }
    assert seen == {
        ("owner", world.hidden): 200,
        ("owner", world.published): 200,
        ("author", world.hidden): 200,
        ("author", world.published): 200,
        ("member", world.hidden): 404,
        ("member", world.published): 200,  # on canonical: no longer unpublished work
    }
