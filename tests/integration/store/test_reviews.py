"""Executions, attach (the compare-and-set), approval and restart recovery."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from forkhorse.domain.model import Approval, Execution, Packet, Review
from forkhorse.domain.receipts import INTERRUPTED, running_summary
from forkhorse.ports.store import Store
from forkhorse.records import put_record

from tests.support.store import CLAIM_TTL, COMMIT, T0, final_summary, record, seed_review

LIVE = T0 + timedelta(minutes=1)


def _attach(store: Store, generation: str = "g1", **overrides: object) -> bool:
    rec = record(generation=generation)
    digest = put_record(store, rec, T0)
    arguments: dict[str, object] = {
        "review_id": "r1",
        "commit": COMMIT,
        "generation": generation,
        "trigger": "review-created",
        "digest": digest,
        "summary": final_summary(rec),
        "now": LIVE,
    }
    arguments.update(overrides)
    return store.attach(**arguments)  # type: ignore[arg-type]


def _digest(store: Store, review_id: str = "r1") -> str | None:
    review = store.get_review(review_id)
    assert review is not None
    assert review.execution is not None
    return review.execution.digest


def _approval(
    commit: str = COMMIT, generation: str | None = "g1", digest: str | None = None
) -> Approval:
    return Approval(
        commit=commit,
        owner_id="owner",
        approved_at=LIVE,
        generation=generation,
        digest=digest,
        require_receipt=True,
    )


def test_a_new_review_runs_without_digest(store: Store) -> None:
    seed_review(store)
    review = store.get_review("r1")
    assert review is not None
    assert review.execution is not None
    assert review.execution.summary == running_summary("review-created", T0)
    assert review.execution.digest is None
    assert [r.id for r in store.list_reviews("proj")] == ["r1"]
    assert store.get_review("ghost") is None


def test_attach_sets_the_digest_and_ends_the_run(store: Store) -> None:
    seed_review(store)
    assert _attach(store)
    review = store.get_review("r1")
    assert review is not None
    assert review.execution is not None
    assert review.execution.summary.status == "passed"
    assert review.execution.digest is not None
    assert review.execution.summary.digest == review.execution.digest
    assert not _attach(store), "a finished execution cannot attach twice"


@pytest.mark.parametrize(
    "override",
    [
        {"generation": "g-other"},
        {"commit": "c" * 40},
        {"trigger": "before-promote"},
        {"review_id": "ghost"},
    ],
    ids=["generation", "commit", "trigger", "review"],
)
def test_attach_compares_commit_generation_and_trigger(
    store: Store, override: dict[str, str]
) -> None:
    seed_review(store)
    if "generation" in override:
        assert not _attach(store, generation=override["generation"])
    else:
        assert not _attach(store, **override)
    assert _digest(store) is None


def test_an_expired_claim_blocks_attach(store: Store) -> None:
    seed_review(store)
    assert not _attach(store, now=T0 + CLAIM_TTL)
    assert _digest(store) is None
    assert _attach(store, now=T0 + CLAIM_TTL - timedelta(microseconds=1))


def test_a_claim_taken_by_another_agent_blocks_attach(store: Store) -> None:
    seed_review(store)
    assert store.release_claim("p1", "agent-1")
    assert store.claim_packet("p1", "agent-2", CLAIM_TTL, LIVE) is not None
    assert not _attach(store)
    assert store.release_claim("p1", "agent-2")
    assert not _attach(store), "no claim at all"


def test_a_stale_execution_never_replaces_the_current_digest(store: Store) -> None:
    seed_review(store)
    assert store.start_execution(
        "r1", COMMIT, "before-promote", "g2", running_summary("before-promote", LIVE)
    )
    assert not _attach(store, generation="g1"), "g1 was replaced by g2"
    assert _attach(store, generation="g2", trigger="before-promote")
    current = _digest(store)
    assert not _attach(store, generation="g1")
    assert _digest(store) == current


def test_update_summary_applies_only_to_the_current_running_generation(store: Store) -> None:
    seed_review(store)
    progress = running_summary("review-created", T0).model_copy(
        update={"checks": final_summary(record()).checks}
    )
    assert store.update_summary("r1", "g1", progress)
    assert not store.update_summary("r1", "g0", progress)
    with pytest.raises(ValueError, match="only attach"):
        store.update_summary("r1", "g1", progress.model_copy(update={"digest": "d" * 64}))
    failed = final_summary(record()).model_copy(update={"status": "infrastructure-error"})
    assert store.update_summary("r1", "g1", failed)
    assert not store.update_summary("r1", "g1", progress), "finished: no more updates"
    assert not _attach(store)


def test_threads_racing_to_attach_exactly_one_wins(store: Store) -> None:
    seed_review(store)
    records = [record(checks=i + 1) for i in range(8)]
    digests = [put_record(store, rec, T0) for rec in records]
    barrier = threading.Barrier(len(records))

    def attempt(index: int) -> bool:
        barrier.wait()
        return store.attach(
            "r1",
            COMMIT,
            "g1",
            "review-created",
            digests[index],
            final_summary(records[index]),
            LIVE,
        )

    with ThreadPoolExecutor(len(records)) as pool:
        results = list(pool.map(attempt, range(len(records))))
    assert results.count(True) == 1
    assert _digest(store) == digests[results.index(True)]


def test_approval_compares_the_current_receipt(store: Store) -> None:
    seed_review(store)
    assert _attach(store)
    digest = _digest(store)
    assert not store.approve("r1", _approval(digest=digest), "0" * 64, "g1")
    assert not store.approve("r1", _approval(digest=digest), digest, "g0")
    assert not store.approve("r1", _approval(commit="c" * 40), digest, "g1")
    assert store.approve("r1", _approval(digest=digest), digest, "g1")
    review = store.get_review("r1")
    assert review is not None
    assert review.approval == _approval(digest=digest)


def test_approval_of_a_review_without_execution(store: Store) -> None:
    seed_review(store, generation=None)
    assert not store.approve("r1", _approval(generation=None), None, "g1")
    assert store.approve("r1", _approval(generation=None), None, None)
    assert not store.approve("ghost", _approval(generation=None), None, None)


def test_approve_loses_to_a_new_execution(store: Store) -> None:
    seed_review(store)
    assert _attach(store)
    seen = _digest(store)
    assert store.start_execution(
        "r1", COMMIT, "before-promote", "g2", running_summary("before-promote", LIVE)
    )
    assert not store.approve("r1", _approval(digest=seen), seen, "g1")
    review = store.get_review("r1")
    assert review is not None
    assert review.approval is None


def test_advisory_approval_ignores_the_receipt_but_not_the_commit(store: Store) -> None:
    """Advisory mode: a run that started (or a digest that changed) since the owner looked
    does not refuse consent; a review that moved to another commit still does."""
    seed_review(store)
    assert _attach(store)
    seen = _digest(store)
    assert store.start_execution(
        "r1", COMMIT, "review-created", "g2", running_summary("review-created", LIVE)
    )
    advisory = _approval(digest=seen).model_copy(update={"require_receipt": False})
    other_commit = advisory.model_copy(update={"commit": "c" * 40})
    assert not store.approve("r1", other_commit, seen, "g1", compare_receipt=False)
    assert store.approve("r1", advisory, seen, "g1", compare_receipt=False)
    review = store.get_review("r1")
    assert review is not None
    assert review.approval == advisory


@pytest.mark.parametrize("round_", range(3))
def test_approve_racing_a_new_execution_never_stores_stale_consent(
    store: Store, round_: int
) -> None:
    seed_review(store)
    assert _attach(store)
    seen = _digest(store)
    barrier = threading.Barrier(2)
    results: dict[str, bool] = {}

    def approve() -> None:
        barrier.wait()
        results["approve"] = store.approve("r1", _approval(digest=seen), seen, "g1")

    def restart() -> None:
        barrier.wait()
        results["start"] = store.start_execution(
            "r1", COMMIT, "before-promote", "g2", running_summary("before-promote", LIVE)
        )

    threads = [threading.Thread(target=approve), threading.Thread(target=restart)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    review = store.get_review("r1")
    assert review is not None
    assert results["start"]
    assert review.execution is not None
    assert review.execution.generation == "g2"
    assert review.execution.digest is None
    if results["approve"]:
        # Consent landed first; it names g1, which the gate sees is no longer current.
        assert review.approval == _approval(digest=seen)
    else:
        assert review.approval is None


def test_restart_recovery_turns_running_into_infrastructure_errors(store: Store) -> None:
    seed_review(store, "r1", packet_id="p1")
    seed_review(store, "r2", packet_id="p2", generation="g9")
    seed_review(store, "r3", packet_id="p3", generation=None)
    assert _attach(store)  # r1 finished before the restart
    restart = T0 + timedelta(seconds=90)

    invalidated = store.invalidate_running(restart)

    assert [(i.review_id, i.project_id, i.generation) for i in invalidated] == [
        ("r2", "proj", "g9")
    ]
    review = store.get_review("r2")
    assert review is not None
    assert review.execution is not None
    summary = review.execution.summary
    assert (summary.status, summary.digest, summary.duration_ms) == (
        "infrastructure-error",
        None,
        90_000,
    )
    assert summary.finished_at == "2026-10-12T16:56:30.000Z"
    assert [(c.outcome, c.message) for c in summary.checks][-1] == (
        "infrastructure-error",
        INTERRUPTED,
    ), "the row a restart writes says what happened"
    rec = record(generation="g9")
    digest = put_record(store, rec, T0)
    assert not store.attach("r2", COMMIT, "g9", "review-created", digest, final_summary(rec), LIVE)
    assert not store.update_summary("r2", "g9", running_summary("review-created", T0))
    assert store.invalidate_running(restart) == []
    r1 = store.get_review("r1")
    assert r1 is not None
    assert r1.execution is not None
    assert r1.execution.summary.status == "passed"


def test_flow_next_review_receipts_attach_idempotently(store: Store) -> None:
    seed_review(store)
    store.put_review_receipt("r1", "b" * 64)
    store.put_review_receipt("r1", "a" * 64)
    store.put_review_receipt("r1", "b" * 64)
    assert store.list_review_receipts("r1") == ["a" * 64, "b" * 64]
    assert store.list_review_receipts("r2") == []


def test_discard_leaves_no_receipt_and_blocks_the_generation(store: Store) -> None:
    seed_review(store)
    assert not store.discard_execution("r1", "g-other"), "only the current generation discards"
    assert store.discard_execution("r1", "g1")
    review = store.get_review("r1")
    assert review is not None
    assert review.execution is None, "a commit without checks reads receipt: null"
    assert not _attach(store), "a discarded generation can never attach"
    assert not store.discard_execution("r1", "g1")
    assert store.invalidate_running(LIVE) == [], "a discarded run is not running any more"


def test_discard_refuses_a_finished_execution(store: Store) -> None:
    seed_review(store)
    assert _attach(store)
    assert not store.discard_execution("r1", "g1")
    assert _digest(store) is not None


def _create_running(store: Store, review_id: str, generation: str, packet_id: str) -> None:
    """A review stored together with its first, running execution, as the API creates it."""
    summary = running_summary("review-created", T0)
    execution = Execution(
        generation=generation, commit=COMMIT, trigger="review-created", summary=summary
    )
    review = Review(
        id=review_id,
        project_id="proj",
        packet_id=packet_id,
        fork_id="f1",
        agent_id="agent-1",
        commit=COMMIT,
        created_at=T0,
        execution=execution,
    )
    assert store.create_review(review)


def test_a_review_created_with_its_execution_runs_and_attaches(store: Store) -> None:
    """The API creates a review and its first execution in one write; that execution must
    be as attachable, updatable and recoverable as one started later."""
    seed_review(store, generation=None)
    store.release_claim("p1", "agent-1")
    store.create_packet(Packet(id="p2", project_id="proj", title="More", created_at=T0))
    assert store.claim_packet("p2", "agent-1", CLAIM_TTL, T0) is not None
    _create_running(store, "r2", "g2", "p2")
    assert store.update_summary("r2", "g2", running_summary("review-created", T0))
    rec = record(generation="g2")
    digest = put_record(store, rec, T0)
    assert store.attach(
        "r2", COMMIT, "g2", "review-created", digest, final_summary(rec, digest), LIVE
    )
    assert _digest(store, "r2") == digest


def test_a_review_created_running_is_recovered_after_a_restart(store: Store) -> None:
    seed_review(store, generation=None)
    _create_running(store, "r9", "g9", "p1")
    assert [i.generation for i in store.invalidate_running(LIVE)] == ["g9"]
