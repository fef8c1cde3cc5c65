"""What listings read instead of the whole ledger: one done promotion's entry, the ledger a
page at a time, each review's latest done promotion, the commits promotions published and a
review's latest requested promotion, each answering for its project alone."""

from datetime import timedelta

import pytest
from forkhorse.domain.model import LedgerEntry, Promotion
from forkhorse.ports.store import Store

from tests.support.store import T0, promote_done

PROJECT = "proj"


def _commit(index: int) -> str:
    return f"{index:040x}"


def _promoted(store: Store, count: int, review_id: str = "r1") -> list[LedgerEntry]:
    """`count` done promotions of one review, a second apart, oldest first."""
    return [
        promote_done(store, PROJECT, review_id, f"m{i:03d}", _commit(i), T0 + timedelta(seconds=i))
        for i in range(count)
    ]


def _walk(store: Store, limit: int, project: str = PROJECT) -> list[str]:
    seen: list[str] = []
    before = None
    for _ in range(50):
        page = store.ledger_page(project, before, limit)
        assert page is not None
        assert len(page) <= limit
        seen += [entry.promotion_id for entry in page]
        if len(page) < limit:
            return seen
        before = page[-1].promotion_id
    raise AssertionError("the pages never ended")


def test_a_done_promotion_has_its_entry_and_no_other_promotion_does(store: Store) -> None:
    (entry,) = _promoted(store, 1)
    assert store.ledger_entry(PROJECT, "m000") == entry
    assert store.ledger_entry("elsewhere", "m000") is None
    assert store.ledger_entry(PROJECT, "ghost") is None
    failed = Promotion(
        id="f1", project_id=PROJECT, review_id="r2", commit=_commit(9), started_at=T0,
        state="queued", deadline=T0 + timedelta(minutes=16),
    )  # fmt: skip
    assert store.request_promotion(failed, T0)
    assert store.settle_promotion(PROJECT, "f1", "failed", None, T0)
    assert store.ledger_entry(PROJECT, "f1") is None


@pytest.mark.parametrize("limit", [1, 3, 7, 100])
def test_ledger_pages_walk_it_newest_first_without_gaps(store: Store, limit: int) -> None:
    entries = _promoted(store, 7)
    expected = [entry.promotion_id for entry in reversed(entries)]
    assert _walk(store, limit) == expected
    assert [e.promotion_id for e in store.ledger(PROJECT)] == expected[::-1], "oldest first"


def test_a_ledger_page_after_an_unknown_or_foreign_entry_is_none(store: Store) -> None:
    _promoted(store, 2)
    assert store.ledger_page(PROJECT, "ghost", 5) is None
    assert store.ledger_page("elsewhere", "m000", 5) is None
    assert store.ledger_page("elsewhere", None, 5) == []


def test_each_review_has_its_latest_done_promotion(store: Store) -> None:
    first, second = _promoted(store, 2)
    other = promote_done(store, PROJECT, "r2", "x1", _commit(50), T0 + timedelta(minutes=1))
    done = store.done_promotions(PROJECT, ["r1", "r2", "never-promoted"])
    assert set(done) == {"r1", "r2"}
    promotion, entry = done["r1"]
    assert (promotion.id, promotion.state, promotion.mode, entry) == (
        "m001", "done", "required", second
    )  # fmt: skip
    assert done["r2"][1] == other
    assert first != second
    assert store.done_promotions("elsewhere", ["r1", "r2"]) == {}
    assert store.done_promotions(PROJECT, []) == {}


def test_published_commits_are_those_a_done_promotion_put_on_canonical(store: Store) -> None:
    _promoted(store, 3)
    asked = {_commit(0), _commit(2), _commit(99)}
    assert store.published_commits(PROJECT, asked) == {_commit(0), _commit(2)}
    assert store.published_commits("elsewhere", asked) == set()
    assert store.published_commits(PROJECT, []) == set()


def test_lookups_take_more_keys_than_one_batch_reads(store: Store) -> None:
    """More reviews and commits than one DynamoDB BatchGetItem takes (100 keys)."""
    entries = [
        promote_done(store, PROJECT, f"r{i}", f"m{i}", _commit(i), T0 + timedelta(seconds=i))
        for i in range(3)
    ]
    reviews = [f"r{i}" for i in range(150)]
    commits = [_commit(i) for i in range(150)]
    assert set(store.done_promotions(PROJECT, reviews)) == {"r0", "r1", "r2"}
    assert store.published_commits(PROJECT, commits) == {entry.commit for entry in entries}


def test_a_reviews_latest_promotion_is_its_latest_request(store: Store) -> None:
    assert store.latest_promotion(PROJECT, "r1") is None
    _promoted(store, 2)
    latest = store.latest_promotion(PROJECT, "r1")
    assert latest is not None
    assert (latest.id, latest.state) == ("m001", "done")
    queued = Promotion(
        id="m-next", project_id=PROJECT, review_id="r1", commit=_commit(7), started_at=T0,
        state="queued", deadline=T0 + timedelta(minutes=16),
    )  # fmt: skip
    assert store.request_promotion(queued, T0 + timedelta(minutes=1))
    again = store.latest_promotion(PROJECT, "r1")
    assert again is not None
    assert (again.id, again.state) == ("m-next", "queued")
    assert store.latest_promotion(PROJECT, "r2") is None
