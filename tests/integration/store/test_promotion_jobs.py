"""Promote jobs in the Store: queued promotions (one live job per review), the queued ->
pending -> writing steps under the fence, and refusals kept for any process to answer."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from forkhorse.domain.model import LedgerEntry, Promotion, Refusal
from forkhorse.ports.store import Store

from tests.support.store import COMMIT, T0

TTL = timedelta(seconds=30)
JOB = timedelta(minutes=16)
CHECKS_FAILED = Refusal(kind="conflict", error="Checks failed before promote.")


def _queued(promotion_id: str, review_id: str = "r1", started: timedelta = JOB * 0) -> Promotion:
    return Promotion(
        id=promotion_id,
        project_id="proj",
        review_id=review_id,
        commit=COMMIT,
        state="queued",
        mode="required",
        started_at=T0 + started,
        deadline=T0 + started + JOB,
    )


def _entry(promotion_id: str) -> LedgerEntry:
    return LedgerEntry(
        project_id="proj",
        promotion_id=promotion_id,
        review_id="r1",
        commit=COMMIT,
        previous_head="c" * 40,
        digest="d" * 64,
        promoted_at=T0,
    )


def _lease(store: Store) -> int:
    token = store.acquire_lease("proj", "holder", TTL, T0)
    assert token is not None
    return token


def test_a_review_has_one_live_promote_job_at_a_time(store: Store) -> None:
    assert store.request_promotion(_queued("m1"), T0)
    assert not store.request_promotion(_queued("m2"), T0), "m1's job may still run"
    assert store.request_promotion(_queued("other", review_id="r2"), T0), "another review"
    assert not store.request_promotion(_queued("m1"), T0 + 2 * JOB), "the id exists"
    stored = store.get_promotion("proj", "m1")
    assert stored is not None
    assert (stored.state, stored.deadline) == ("queued", T0 + JOB)
    assert store.open_promotion("proj") is None, "a queued promotion fences nothing"

    # Past its deadline the job is presumed dead, and the review may promote again.
    assert store.request_promotion(_queued("m2", started=JOB), T0 + JOB)
    # Once settled, the next request need not wait for any deadline.
    assert store.settle_promotion("proj", "m2", "failed", None, T0 + JOB, CHECKS_FAILED)
    assert store.request_promotion(_queued("m3", started=JOB), T0 + JOB)
    ids = [p.id for p in store.list_promotions("proj") if p.review_id == "r1"]
    assert ids == ["m1", "m2", "m3"]


def test_racing_requests_for_one_review_queue_exactly_one_job(store: Store) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda n: store.request_promotion(_queued(f"m{n}"), T0), range(16)))
    assert results.count(True) == 1
    assert len(store.list_promotions("proj")) == 1


def test_a_queued_promotion_begins_under_the_lease_then_arms(store: Store) -> None:
    token = _lease(store)
    queued = _queued("m1")
    assert store.request_promotion(queued, T0)
    pending = queued.model_copy(update={"state": "pending", "previous_head": "c" * 40})
    assert store.begin_promotion(pending, token, T0)
    begun = store.get_promotion("proj", "m1")
    assert begun is not None
    assert (begun.state, begun.previous_head, begun.deadline) == ("pending", "c" * 40, T0 + JOB)
    assert store.open_promotion("proj") == begun, "pending fences the project"
    assert not store.begin_promotion(pending, token, T0), "begins once"

    assert not store.arm_promotion("proj", "m1", "d" * 64, token + 1, T0), "wrong token"
    assert not store.arm_promotion("proj", "m1", "d" * 64, token, T0 + TTL), "lease lapsed"
    assert store.arm_promotion("proj", "m1", "d" * 64, token, T0)
    armed = store.get_promotion("proj", "m1")
    assert armed is not None
    assert (armed.state, armed.digest) == ("writing", "d" * 64)
    assert store.open_promotion("proj") == armed
    assert not store.arm_promotion("proj", "m1", "e" * 64, token, T0), "arms once"

    assert store.settle_promotion("proj", "m1", "done", _entry("m1"), T0)
    assert store.open_promotion("proj") is None
    assert store.ledger("proj") == [_entry("m1")]


def test_a_writing_promotion_can_end_uncertain_and_then_fences(store: Store) -> None:
    token = _lease(store)
    assert store.request_promotion(_queued("m1"), T0)
    assert store.begin_promotion(_queued("m1").model_copy(update={"state": "pending"}), token, T0)
    assert store.arm_promotion("proj", "m1", None, token, T0)
    assert store.settle_promotion("proj", "m1", "uncertain", None, T0)
    assert store.request_promotion(_queued("m2"), T0), "the job ended; the review may retry"
    assert not store.begin_promotion(
        _queued("m2").model_copy(update={"state": "pending"}), token, T0
    ), "fenced while uncertain"
    assert store.settle_promotion("proj", "m1", "failed", None, T0)
    assert store.begin_promotion(_queued("m2").model_copy(update={"state": "pending"}), token, T0)


def test_a_refusal_is_kept_with_the_failed_promotion(store: Store) -> None:
    token = _lease(store)
    assert store.request_promotion(_queued("m1"), T0)
    assert store.begin_promotion(_queued("m1").model_copy(update={"state": "pending"}), token, T0)
    assert store.settle_promotion("proj", "m1", "failed", None, T0, CHECKS_FAILED)
    failed = store.get_promotion("proj", "m1")
    assert failed is not None
    assert (failed.state, failed.refusal, failed.settled_at) == ("failed", CHECKS_FAILED, T0)
    assert store.open_promotion("proj") is None, "failed lifts the fence"

    reasons = Refusal(kind="conflict", error="Promote needs consent.", reasons=("consent-missing",))
    assert store.request_promotion(_queued("m2"), T0)
    assert store.settle_promotion("proj", "m2", "failed", None, T0, reasons)
    stored = store.get_promotion("proj", "m2")
    assert stored is not None
    assert stored.refusal == reasons


def test_a_queued_promotion_only_fails_and_never_touches_the_fence(store: Store) -> None:
    token = _lease(store)
    assert store.begin_promotion(_queued("open").model_copy(update={"state": "pending"}), token, T0)
    assert store.request_promotion(_queued("m1", review_id="r2"), T0)
    assert not store.settle_promotion("proj", "m1", "uncertain", None, T0)
    assert not store.settle_promotion("proj", "m1", "done", _entry("m1"), T0)
    assert store.settle_promotion("proj", "m1", "failed", None, T0, CHECKS_FAILED)
    open_ = store.open_promotion("proj")
    assert open_ is not None
    assert open_.id == "open", "the other promotion's fence still holds"
    failed = _queued("m1", review_id="r2").model_copy(update={"state": "pending"})
    assert not store.begin_promotion(failed, token, T0), "a settled job never begins"
    with pytest.raises(ValueError, match="refusal"):
        store.settle_promotion("proj", "open", "uncertain", None, T0, CHECKS_FAILED)
