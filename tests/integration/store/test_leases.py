"""The per-project workflow lease, fencing tokens, promotions and the ledger."""

from datetime import timedelta

import pytest
from forkhorse.domain.model import LedgerEntry, Promotion
from forkhorse.ports.store import Store

from tests.support.store import COMMIT, T0

TTL = timedelta(seconds=30)


def _promotion(promotion_id: str) -> Promotion:
    return Promotion(
        id=promotion_id, project_id="proj", review_id="r1", commit=COMMIT, started_at=T0
    )


def _entry(promotion_id: str, seconds: int = 5) -> LedgerEntry:
    return LedgerEntry(
        project_id="proj",
        promotion_id=promotion_id,
        review_id="r1",
        commit=COMMIT,
        previous_head="c" * 40,
        digest="d" * 64,
        promoted_at=T0 + timedelta(seconds=seconds),
    )


def test_the_lease_excludes_others_until_it_expires(store: Store) -> None:
    first = store.acquire_lease("proj", "alice", TTL, T0)
    assert first is not None
    assert store.acquire_lease("proj", "bob", TTL, T0 + timedelta(seconds=29)) is None
    assert store.check_fence("proj", first, T0 + timedelta(seconds=29))
    assert store.acquire_lease("other", "bob", TTL, T0) is not None

    second = store.acquire_lease("proj", "bob", TTL, T0 + TTL)
    assert second is not None
    assert second > first
    assert not store.check_fence("proj", first, T0 + TTL)
    assert store.check_fence("proj", second, T0 + TTL)
    assert not store.renew_lease("proj", "alice", first, TTL, T0 + TTL), "fenced out"
    assert not store.release_lease("proj", "alice", first)


def test_renew_extends_and_release_frees_but_tokens_keep_growing(store: Store) -> None:
    token = store.acquire_lease("proj", "alice", TTL, T0)
    assert token is not None
    assert store.renew_lease("proj", "alice", token, TTL, T0 + timedelta(seconds=20))
    assert store.check_fence("proj", token, T0 + timedelta(seconds=45))
    assert not store.renew_lease("proj", "bob", token, TTL, T0 + timedelta(seconds=21))
    assert not store.renew_lease("proj", "alice", token, TTL, T0 + timedelta(seconds=50))
    assert store.release_lease("proj", "alice", token)
    assert not store.check_fence("proj", token, T0 + timedelta(seconds=21))
    again = store.acquire_lease("proj", "bob", TTL, T0 + timedelta(seconds=22))
    assert again is not None
    assert again > token


def test_a_fenced_write_with_a_stale_token_is_refused(store: Store) -> None:
    stale = store.acquire_lease("proj", "alice", TTL, T0)
    assert stale is not None
    current = store.acquire_lease("proj", "bob", TTL, T0 + TTL)
    assert current is not None
    assert not store.begin_promotion(_promotion("m1"), stale, T0 + TTL)
    assert not store.begin_promotion(_promotion("m1"), current, T0 + 2 * TTL), "expired"
    assert store.open_promotion("proj") is None
    assert store.begin_promotion(_promotion("m1"), current, T0 + TTL)


def test_an_uncertain_promotion_fences_the_project_until_reconciled(store: Store) -> None:
    token = store.acquire_lease("proj", "alice", TTL, T0)
    assert token is not None
    assert store.begin_promotion(_promotion("m1"), token, T0)
    assert not store.begin_promotion(_promotion("m2"), token, T0), "one at a time"

    assert store.settle_promotion("proj", "m1", "uncertain", None, T0)
    open_ = store.open_promotion("proj")
    assert open_ is not None
    assert (open_.id, open_.state) == ("m1", "uncertain")
    assert not store.begin_promotion(_promotion("m2"), token, T0), "fenced while uncertain"
    assert not store.settle_promotion("proj", "m1", "uncertain", None, T0)

    assert store.settle_promotion("proj", "m1", "done", _entry("m1"), T0)
    assert store.open_promotion("proj") is None
    assert store.ledger("proj") == [_entry("m1")]
    assert not store.settle_promotion("proj", "m1", "failed", None, T0), "already settled"
    assert store.begin_promotion(_promotion("m2"), token, T0)
    assert [p.id for p in store.list_promotions("proj")] == ["m1", "m2"]


def test_done_needs_exactly_its_ledger_entry(store: Store) -> None:
    token = store.acquire_lease("proj", "alice", TTL, T0)
    assert token is not None
    assert store.begin_promotion(_promotion("m1"), token, T0)
    with pytest.raises(ValueError, match="ledger entry"):
        store.settle_promotion("proj", "m1", "done", None, T0)
    with pytest.raises(ValueError, match="ledger entry"):
        store.settle_promotion("proj", "m1", "failed", _entry("m1"), T0)
    assert store.settle_promotion("proj", "m1", "failed", None, T0)
    assert store.ledger("proj") == []
    assert store.get_promotion("proj", "m1") is not None
    assert not store.settle_promotion("proj", "ghost", "failed", None, T0)
