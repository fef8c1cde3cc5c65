"""`/state` shows the newest ledger entries and a review's own promotion; `GET .../ledger`
pages through the whole ledger behind an opaque cursor. Neither reads the project's whole
ledger: the store answers for the entries and reviews shown."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from forkhorse.domain.limits import PAGE
from forkhorse.service.listings import BAD_CURSOR, BAD_LIMIT, page_cursor
from forkhorse.wiring.local import LocalApp

from tests.support.api_world import ApiWorld, local_api_world
from tests.support.store import promote_done


@pytest.fixture
def world(mocked_local_app: LocalApp) -> ApiWorld:
    return local_api_world(mocked_local_app)


def _promote_all(world: ApiWorld, count: int) -> list[str]:
    """`count` reviews, each promoted once (a second apart); their promotion ids, oldest
    first."""
    store, now = world.service.context.store, world.service.context.clock.now()
    reviews = world.seed_reviews(count)
    for index, review_id in enumerate(reviews):
        at = now + timedelta(seconds=index)
        promote_done(store, world.ids["project"], review_id, f"p-{index:04d}", f"{index:040x}", at)
    return [f"p-{index:04d}" for index in range(count)]


def _get(world: ApiWorld, path: str, token: str | None = None) -> Any:
    status, body = world.call("GET", path, token)
    assert status == 200, body
    return body


def _walk(world: ApiWorld, cursor: str | None, limit: int, token: str | None = None) -> list[str]:
    """Every promotion id the ledger pages give from `cursor` on (bounded)."""
    base = f"/projects/{world.ids['project']}/ledger?limit={limit}"
    seen: list[str] = []
    for _ in range(100):
        page = _get(world, base + (f"&cursor={cursor}" if cursor else ""), token)
        assert len(page["ledger"]) <= limit
        seen += [entry["promotionId"] for entry in page["ledger"]]
        cursor = page["next"]
        if cursor is None:
            return seen
    raise AssertionError("the pages never ended")


def test_state_shows_the_newest_entries_and_the_pages_hold_the_rest(world: ApiWorld) -> None:
    promoted = _promote_all(world, PAGE.state_ledger + 5)
    state = _get(world, f"/projects/{world.ids['project']}/state")
    assert [entry["promotionId"] for entry in state["ledger"]] == promoted[5:], "oldest first"
    assert _walk(world, state["ledgerNext"], 2) == list(reversed(promoted[:5]))
    assert _walk(world, None, 7) == list(reversed(promoted))
    assert _walk(world, None, PAGE.max_size) == list(reversed(promoted))


def test_a_short_ledger_is_all_in_state(world: ApiWorld) -> None:
    promoted = _promote_all(world, 3)
    state = _get(world, f"/projects/{world.ids['project']}/state")
    assert [entry["promotionId"] for entry in state["ledger"]] == promoted
    assert state["ledgerNext"] is None
    empty = _get(world, f"/projects/{world.ids['project']}/ledger")
    assert len(empty["ledger"]) == 3
    assert empty["next"] is None


def test_each_review_shows_its_own_promotion_and_others_see_published_work(
    world: ApiWorld,
) -> None:
    """Every seeded review has the same commit: once one is promoted, the commit is on
    canonical and another member sees them all, but only the promoted one has a promotion."""
    reviews = world.seed_reviews(3)
    service, project = world.service, world.ids["project"]
    owner = service.authenticate(world.owner_token)
    assert owner is not None
    other = service.projects.create_agent(owner, "other")
    service.projects.add_member(owner, project, other.agent.id)
    assert _get(world, f"/projects/{project}/reviews", other.token)["reviews"] == []

    store, now = service.context.store, service.context.clock.now()
    promote_done(store, project, reviews[1], "p-1", world.ids["commit"], now)
    page = _get(world, f"/projects/{project}/reviews", other.token)["reviews"]
    assert [review["id"] for review in page] == list(reversed(reviews))
    promotions = {review["id"]: review["promotion"] for review in page}
    assert promotions[reviews[0]] is None
    assert promotions[reviews[2]] is None
    assert (promotions[reviews[1]]["commit"], promotions[reviews[1]]["mode"]) == (
        world.ids["commit"],
        "required",
    )
    one = _get(world, f"/projects/{project}/reviews/{reviews[1]}", other.token)["review"]
    assert one["promotion"] == promotions[reviews[1]]


def test_members_read_the_ledger_and_outsiders_do_not(world: ApiWorld) -> None:
    _promote_all(world, 2)
    project = world.ids["project"]
    assert len(_get(world, f"/projects/{project}/ledger", world.agent_token)["ledger"]) == 2
    owner = world.service.authenticate(world.owner_token)
    assert owner is not None
    outsider = world.service.projects.create_agent(owner, "outsider")
    assert world.call("GET", f"/projects/{project}/ledger", outsider.token)[0] == 403


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("cursor=not-a-cursor", BAD_CURSOR),
        ("cursor=" + "A" * (PAGE.cursor_chars + 1), BAD_CURSOR),
        (f"cursor={page_cursor('no-such-promotion')}", BAD_CURSOR),
        ("limit=0", BAD_LIMIT),
        (f"limit={PAGE.max_size + 1}", BAD_LIMIT),
    ],
)
def test_a_bad_ledger_cursor_or_page_size_is_a_400(world: ApiWorld, query: str, error: str) -> None:
    _promote_all(world, 2)
    path = f"/projects/{world.ids['project']}/ledger?{query}"
    assert world.call("GET", path) == (400, {"error": error})


def test_a_review_cursor_is_not_a_ledger_cursor(world: ApiWorld) -> None:
    """Both cursors look alike; a review's id names no ledger entry."""
    _promote_all(world, 2)
    reviews = _get(world, f"/projects/{world.ids['project']}/reviews?limit=1")
    path = f"/projects/{world.ids['project']}/ledger?cursor={reviews['next']}"
    assert world.call("GET", path) == (400, {"error": BAD_CURSOR})
