"""Store conformance for `retarget_review`: a followed push moves a review to a new head."""

from forkhorse.domain.model import Approval
from forkhorse.domain.receipts import running_summary
from forkhorse.ports.store import Store

from tests.support.store import COMMIT, T0, seed_review

NEW = "b" * 40


def _approve(store: Store) -> None:
    review = store.get_review("r1")
    assert review is not None
    assert review.execution is not None
    approval = Approval(
        commit=COMMIT,
        owner_id="owner",
        approved_at=T0,
        generation=review.execution.generation,
        digest=None,
        require_receipt=False,
    )
    assert store.approve("r1", approval, None, review.execution.generation)


def test_retarget_moves_commit_clears_consent_and_starts_a_run(store: Store) -> None:
    seed_review(store)
    _approve(store)
    summary = running_summary("review-created", T0)
    assert store.retarget_review("r1", COMMIT, NEW, "g2", summary)
    review = store.get_review("r1")
    assert review is not None
    assert review.execution is not None
    assert review.commit == NEW
    assert review.approval is None
    assert (review.execution.generation, review.execution.commit) == ("g2", NEW)
    assert review.execution.trigger == "review-created"
    assert review.execution.summary == summary
    assert [r.id for r in store.list_reviews("proj")] == ["r1"]


def test_retarget_is_a_compare_and_set_on_the_old_commit(store: Store) -> None:
    seed_review(store)
    summary = running_summary("review-created", T0)
    assert store.retarget_review("r1", COMMIT, NEW, "g2", summary)
    assert not store.retarget_review("r1", COMMIT, "c" * 40, "g3", summary)
    assert not store.retarget_review("missing", COMMIT, NEW, "g4", summary)
    review = store.get_review("r1")
    assert review is not None
    assert review.execution is not None
    assert (review.commit, review.execution.generation) == (NEW, "g2")
    # The old generation can no longer attach; the new one is current and running.
    assert store.invalidate_running(T0)[0].generation == "g2"
