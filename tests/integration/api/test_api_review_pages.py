"""`/state` shows the active reviews (each fork and packet's newest); `GET .../reviews` pages
through all of them behind an opaque cursor, with the same role rules as `/state`."""

from __future__ import annotations

from typing import Any

import pytest
from forkhorse.domain.limits import PAGE
from forkhorse.service.listings import BAD_CURSOR, BAD_LIMIT, page_cursor
from forkhorse.wiring.local import LocalApp

from tests.support.api_world import ApiWorld, local_api_world


@pytest.fixture
def world(mocked_local_app: LocalApp) -> ApiWorld:
    return local_api_world(mocked_local_app)


def _walk(world: ApiWorld, limit: int, token: str | None = None) -> list[str]:
    """Every review id the pages give, following `next` (bounded)."""
    path = f"/projects/{world.ids['project']}/reviews?limit={limit}"
    seen: list[str] = []
    for _ in range(100):
        status, page = world.call("GET", path, token)
        assert status == 200, page
        assert len(page["reviews"]) <= limit
        seen += [review["id"] for review in page["reviews"]]
        if page["next"] is None:
            return seen
        path = f"/projects/{world.ids['project']}/reviews?limit={limit}&cursor={page['next']}"
    raise AssertionError("the pages never ended")


def _state_ids(world: ApiWorld, token: str | None = None) -> list[str]:
    status, state = world.call("GET", f"/projects/{world.ids['project']}/state", token)
    assert status == 200, state
    return [review["id"] for review in state["reviews"]]


def test_state_shows_each_packets_newest_review_and_pages_hold_them_all(world: ApiWorld) -> None:
    work = world.seed_reviews(7)
    other_packet = world.new_packet("more")
    more = world.seed_reviews(2, packet=other_packet, prefix="more")
    assert _state_ids(world) == [work[-1], more[-1]]
    everything = list(reversed(work + more))
    assert _walk(world, 3) == everything
    assert _walk(world, PAGE.max_size) == everything


def test_a_review_outside_state_is_readable_by_id_as_state_would_show_it(
    world: ApiWorld,
) -> None:
    first, last = world.seed_reviews(2)
    project = world.ids["project"]
    status, state = world.call("GET", f"/projects/{project}/state")
    assert status == 200
    for review_id in (first, last):
        status, body = world.call("GET", f"/projects/{project}/reviews/{review_id}")
        assert status == 200, body
        assert body["review"]["id"] == review_id
        assert body["review"]["receipt"]["status"] == "running"
    # Read alone, a review also says where the log holds its receipt (none while running).
    assert world.call("GET", f"/projects/{project}/reviews/{last}")[1]["review"] == {
        **state["reviews"][0],
        "logEntry": None,
    }
    assert world.call("GET", f"/projects/{project}/reviews/nope")[0] == 404


def test_an_agent_sees_in_pages_what_it_sees_in_state(world: ApiWorld) -> None:
    mine = world.seed_reviews(3)
    service, project = world.service, world.ids["project"]
    owner = service.authenticate(world.owner_token)
    assert owner is not None
    other = service.projects.create_agent(owner, "other")
    service.projects.add_member(owner, project, other.agent.id)
    # Another member sees neither the state's review nor any page's: none is published.
    assert _state_ids(world, other.token) == []
    assert _walk(world, 2, other.token) == []
    status, _ = world.call("GET", f"/projects/{project}/reviews/{mine[0]}", other.token)
    assert status == 404
    # The review's own agent sees them all.
    assert _state_ids(world, world.agent_token) == [mine[-1]]
    assert _walk(world, 2, world.agent_token) == list(reversed(mine))
    # An agent that is not a member is refused, as for `/state`.
    outsider = service.projects.create_agent(owner, "outsider")
    assert world.call("GET", f"/projects/{project}/reviews", outsider.token)[0] == 403
    assert world.call("GET", f"/projects/{project}/state", outsider.token)[0] == 403


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("cursor=not-a-cursor", BAD_CURSOR),
        ("cursor=" + "A" * (PAGE.cursor_chars + 1), BAD_CURSOR),
        (f"cursor={page_cursor('no-such-review')}", BAD_CURSOR),
        ("cursor=", BAD_CURSOR),
        ("limit=0", BAD_LIMIT),
        (f"limit={PAGE.max_size + 1}", BAD_LIMIT),
    ],
)
def test_a_bad_cursor_or_page_size_is_a_400(world: ApiWorld, query: str, error: str) -> None:
    world.seed_reviews(2)
    path = f"/projects/{world.ids['project']}/reviews?{query}"
    assert world.call("GET", path) == (400, {"error": error})


def test_a_non_numeric_page_size_is_a_400(world: ApiWorld) -> None:
    status, body = world.call("GET", f"/projects/{world.ids['project']}/reviews?limit=many")
    assert status == 400
    assert set(body) == {"error"}
    assert "limit" in body["error"]


def test_a_cursor_from_another_project_is_a_400(world: ApiWorld) -> None:
    world.seed_reviews(3)
    first = _page(world, f"/projects/{world.ids['project']}/reviews?limit=1")
    owner = world.service.authenticate(world.owner_token)
    assert owner is not None
    elsewhere = world.service.projects.create_project(owner, "elsewhere", True).project.id
    path = f"/projects/{elsewhere}/reviews?cursor={first['next']}"
    assert world.call("GET", path) == (400, {"error": BAD_CURSOR})


def test_a_page_never_holds_more_than_the_largest_size(world: ApiWorld) -> None:
    world.seed_reviews(PAGE.max_size + 5)
    page = _page(world, f"/projects/{world.ids['project']}/reviews?limit={PAGE.max_size}")
    assert len(page["reviews"]) == PAGE.max_size
    assert page["next"] is not None
    default = _page(world, f"/projects/{world.ids['project']}/reviews")
    assert len(default["reviews"]) == PAGE.default_size


def _page(world: ApiWorld, path: str) -> Any:
    status, page = world.call("GET", path)
    assert status == 200, page
    return page
