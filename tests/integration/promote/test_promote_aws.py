"""Promote on AWS: the ApiFunction answers 202 and queues the job; the PromoteFunction runs
the before-promote run through the real ReceiptRun state machine under the workflow lease;
any ApiFunction container answers GET .../promotion from the Store."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from forkhorse.api.aws import aws_settings
from forkhorse.service.promotions import ALREADY_RUNNING, JOB_STOPPED, PROMOTE_FAILED

from tests.integration.promote.conftest import (
    FAILING,
    OWNER,
    PASSING,
    PROMOTE_FUNCTION,
    AwsWorld,
    _module,
)

CHECKS_FAILED = {"error": "Checks failed before promote."}


def _promote(world: AwsWorld, review_id: str, commit: str) -> tuple[int, Any]:
    return world.call("POST", f"{world.promotion_path(review_id)}/promote", {"commit": commit})


def test_a_promote_answers_202_and_any_container_reads_its_outcome(aws_world: AwsWorld) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, PASSING)
    review_id = aws_world.approved(lane, commit)
    reviewed = aws_world.summary(review_id)
    assert reviewed is not None
    initial = aws_world.canonical()

    status, body = _promote(aws_world, review_id, commit)
    assert status == 202, body
    pending = body["promotion"]
    assert (pending["state"], pending["commit"], pending["mode"]) == ("pending", commit, "required")
    assert pending["id"]
    # Another container sees the same job: one live promote job per review.
    assert _promote(aws_world, review_id, commit) == (409, {"error": ALREADY_RUNNING})

    status, body = aws_world.settle(review_id)
    assert status == 200, body
    promotion = body["promotion"]
    assert (promotion["from"], promotion["to"], promotion["mode"]) == (initial, commit, "required")
    assert aws_world.canonical() == commit
    after = aws_world.summary(review_id)
    assert after is not None
    assert (after.trigger, after.status) == ("before-promote", "passed")
    assert after.digest == promotion["digest"] != reviewed.digest
    ledger = aws_world.store.ledger(aws_world.project_id)
    assert [entry.digest for entry in ledger] == [promotion["digest"]]
    assert [job.name for job in aws_world.jobs] == [f"promote-{pending['id']}"]
    # The lease is free again and nothing fences the project.
    assert aws_world.store.open_promotion(aws_world.project_id) is None
    assert aws_world.store.acquire_lease(
        aws_world.project_id, "probe", timedelta(seconds=1), aws_world.clock.now()
    )


def test_the_exact_409_is_kept_and_read_by_a_fresh_service(aws_world: AwsWorld) -> None:
    service = aws_world.service()
    service.projects.set_settings(OWNER, aws_world.project_id, False)
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, FAILING)
    review_id = aws_world.approved(lane, commit)  # advisory: failing evidence is no gate
    service.projects.set_settings(OWNER, aws_world.project_id, True)
    initial = aws_world.canonical()

    status, body = _promote(aws_world, review_id, commit)
    assert status == 202, body
    assert aws_world.settle(review_id) == (409, CHECKS_FAILED)
    aws_world.join_jobs()

    fresh = aws_world.service()
    answer = fresh.promotions.status(OWNER, aws_world.project_id, review_id)
    assert (answer.status, answer.body) == (409, CHECKS_FAILED)
    [promotion] = aws_world.promotions(review_id)
    assert promotion.state == "failed"
    assert promotion.refusal is not None
    assert (promotion.refusal.status, promotion.refusal.error) == (409, CHECKS_FAILED["error"])
    # The failed before-promote summary stays visible; canonical did not move.
    summary = aws_world.summary(review_id)
    assert summary is not None
    assert (summary.trigger, summary.status) == ("before-promote", "failed")
    assert aws_world.canonical() == initial
    assert aws_world.store.ledger(aws_world.project_id) == []
    assert aws_world.store.open_promotion(aws_world.project_id) is None


def test_a_promote_function_that_dies_mid_run_fences_until_the_next_promote(
    aws_world: AwsWorld,
) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, PASSING)
    review_id = aws_world.approved(lane, commit)
    initial = aws_world.canonical()

    aws_world.freeze_next = 1
    api = _module("api")
    status, body = _promote(aws_world, review_id, commit)
    assert status == 202, body
    dead_id = body["promotion"]["id"]
    _wait_for(lambda: _state(aws_world, dead_id) == "pending")
    summary = aws_world.summary(review_id)
    assert summary is not None
    assert summary.trigger == "before-promote", "it died inside its before-promote run"
    # Within its deadline the job may still be running.
    path = f"{aws_world.promotion_path(review_id)}/promotion"
    assert aws_world.call("GET", path, api=api)[0] == 202
    fence = aws_world.store.open_promotion(aws_world.project_id)
    assert fence is not None
    assert fence.id == dead_id

    # Past the function's timeout: the lease has lapsed and the job is presumed dead.
    settings = aws_settings()
    aws_world.clock.offset = settings.lease_ttl + timedelta(minutes=1)
    assert aws_world.call("GET", path, api=api) == (409, {"error": JOB_STOPPED})
    fence = aws_world.store.open_promotion(aws_world.project_id)
    assert fence is not None
    assert fence.id == dead_id, "still fenced: only a promote reconciles"
    assert aws_world.canonical() == initial

    # The next promote reconciles the dead promotion under the lease, then promotes.
    status, body = _promote(aws_world, review_id, commit)
    assert status == 202, body
    status, body = aws_world.settle(review_id)
    assert status == 200, body
    assert aws_world.canonical() == commit
    dead = aws_world.store.get_promotion(aws_world.project_id, dead_id)
    assert dead is not None
    assert dead.state == "failed"
    assert dead.refusal is not None
    assert dead.refusal.error == JOB_STOPPED

    # The frozen function thaws (a late instance, say): it can write nothing.
    aws_world.thaw.set()
    for job in aws_world.jobs:
        job.join(10)
    assert aws_world.canonical() == commit
    assert len(aws_world.store.ledger(aws_world.project_id)) == 1
    assert aws_world.store.open_promotion(aws_world.project_id) is None


def test_two_racing_promotes_are_serialized_by_the_lease(aws_world: AwsWorld) -> None:
    first, second = aws_world.lane("first"), aws_world.lane("second")
    commit_a = aws_world.push(first, PASSING)
    # The second fork carries a child of the first commit: both can fast-forward in order.
    repos = aws_world.runtime.git.store(aws_world.project_id)
    head = repos.head(second.fork_id)
    assert repos.update_fork_ref(second.fork_id, "refs/heads/main", head, commit_a)
    commit_b = aws_world.push(second, {**PASSING, "second.txt": "b\n"})
    review_a = aws_world.approved(first, commit_a)
    review_b = aws_world.approved(second, commit_b)
    results: dict[str, tuple[int, Any]] = {}

    def promote(review_id: str, commit: str) -> None:
        status, body = _promote(aws_world, review_id, commit)
        assert status == 202, body
        results[review_id] = aws_world.settle(review_id)

    threads = [
        threading.Thread(target=promote, args=(review_a, commit_a)),
        threading.Thread(target=promote, args=(review_b, commit_b)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(status for status, _ in results.values())
    assert statuses in ([200, 200], [200, 409]), results
    runs = [aws_world.summary(review) for review in (review_a, review_b)]
    before_promote = [s for s in runs if s is not None and s.trigger == "before-promote"]
    # Each before-promote run happened inside the lease: their intervals never overlap.
    if len(before_promote) == 2:
        early, late = sorted(before_promote, key=lambda summary: summary.started_at)
        assert early.finished_at is not None
        assert early.finished_at <= late.started_at
    assert len(aws_world.store.ledger(aws_world.project_id)) == statuses.count(200)
    assert aws_world.canonical() in (commit_a, commit_b)
    assert aws_world.store.open_promotion(aws_world.project_id) is None


def _state(world: AwsWorld, promotion_id: str) -> str | None:
    promotion = world.store.get_promotion(world.project_id, promotion_id)
    return None if promotion is None else promotion.state


def _wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_job_that_cannot_be_queued_fails_and_leaves_the_review_free(
    aws_world: AwsWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, PASSING)
    review_id = aws_world.approved(lane, commit)
    monkeypatch.setenv("PROMOTE_FUNCTION_NAME", "")
    with pytest.raises(RuntimeError, match="PROMOTE_FUNCTION_NAME"):
        _promote(aws_world, review_id, commit)
    [failed] = aws_world.promotions(review_id)
    assert failed.state == "failed"
    path = f"{aws_world.promotion_path(review_id)}/promotion"
    assert aws_world.call("GET", path) == (409, {"error": PROMOTE_FAILED})
    assert aws_world.jobs == []

    monkeypatch.setenv("PROMOTE_FUNCTION_NAME", PROMOTE_FUNCTION)
    assert _promote(aws_world, review_id, commit)[0] == 202
    assert aws_world.settle(review_id)[0] == 200
    assert aws_world.canonical() == commit
