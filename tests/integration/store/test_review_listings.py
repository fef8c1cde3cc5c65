"""The active reviews `/state` shows and the paginated history behind them: one suite, run
against SQLite and moto's DynamoDB."""

import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from forkhorse.adapters.sqlite import SqliteStore
from forkhorse.adapters.sqlite.database import DATABASE_NAME
from forkhorse.domain.model import Fork, Packet, Review
from forkhorse.ports.store import Store

from tests.support.store import COMMIT, T0, seed_review


def _review(
    store: Store, review_id: str, minute: int, fork: str = "f1", packet: str = "p1"
) -> None:
    review = Review(
        id=review_id,
        project_id="proj",
        packet_id=packet,
        fork_id=fork,
        agent_id="agent-1",
        commit=COMMIT,
        created_at=T0 + timedelta(minutes=minute),
    )
    assert store.create_review(review)


def _ids(reviews: list[Review] | None) -> list[str]:
    assert reviews is not None
    return [review.id for review in reviews]


def _world(store: Store) -> None:
    """r1 (seeded), then a second packet and fork, and reviews across the pairs."""
    seed_review(store, "r1")
    store.create_packet(Packet(id="p2", project_id="proj", title="More", created_at=T0))
    store.create_fork(
        Fork(id="f2", project_id="proj", name="other", owner_agent_id="agent-1", created_at=T0)
    )
    _review(store, "r2", 1, packet="p2")
    _review(store, "r3", 2, fork="f2")
    _review(store, "r4", 3)  # replaces r1: same fork, same packet


def test_a_newer_review_of_a_packet_from_a_fork_replaces_the_active_one(store: Store) -> None:
    _world(store)
    assert _ids(store.list_active_reviews("proj")) == ["r2", "r3", "r4"]
    _review(store, "r5", 4, packet="p2")
    assert _ids(store.list_active_reviews("proj")) == ["r3", "r4", "r5"]
    assert _ids(store.list_reviews("proj")) == ["r1", "r2", "r3", "r4", "r5"]


def test_active_reviews_carry_their_current_execution(store: Store) -> None:
    seed_review(store, "r1", generation="g1")
    [active] = store.list_active_reviews("proj")
    assert active == store.get_review("r1")
    assert active.execution is not None
    assert active.execution.generation == "g1"


def test_a_refused_duplicate_changes_no_active_review(store: Store) -> None:
    _world(store)
    duplicate = store.get_review("r1")
    assert duplicate is not None
    assert not store.create_review(duplicate)
    assert _ids(store.list_active_reviews("proj")) == ["r2", "r3", "r4"]


def test_other_projects_have_no_active_reviews_or_pages(store: Store) -> None:
    _world(store)
    assert store.list_active_reviews("elsewhere") == []
    assert store.list_reviews_page("elsewhere", None, 10) == []
    assert store.list_reviews_page("elsewhere", "r4", 10) is None


def test_pages_walk_the_history_newest_first_without_gaps(store: Store) -> None:
    _world(store)
    for minute in range(4, 9):
        _review(store, f"r{minute + 1}", minute)
    walked: list[str] = []
    before: str | None = None
    for _ in range(10):
        page = _ids(store.list_reviews_page("proj", before, 3))
        assert len(page) <= 3
        walked += page
        if len(page) < 3:
            break
        before = page[-1]
    assert walked == [f"r{n}" for n in range(9, 0, -1)]


def test_a_page_after_an_unknown_review_is_none(store: Store) -> None:
    _world(store)
    assert store.list_reviews_page("proj", "no-such-review", 5) is None
    assert _ids(store.list_reviews_page("proj", "r1", 5)) == []


def test_a_database_from_before_the_active_set_gets_it_from_its_history(tmp_path: Path) -> None:
    old = SqliteStore(tmp_path)
    seed_review(old, "r1")
    _review(old, "r2", 1)
    _review(old, "r3", 2, packet="p2")
    old.close()
    with closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as conn, conn:
        conn.execute("DROP INDEX reviews_active")
        conn.execute("ALTER TABLE reviews DROP COLUMN latest")
    reopened = SqliteStore(tmp_path)
    try:
        assert _ids(reopened.list_active_reviews("proj")) == ["r2", "r3"]
    finally:
        reopened.close()
