"""Promote on AWS: the ApiFunction starts a PromoteRun execution and answers 202; the real
PromoteRun machine takes the lease, runs the before-promote ReceiptRun nested, verifies and
fast-forwards; any ApiFunction container answers GET .../promotion from the Store."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from forkhorse.service.promote.request import ALREADY_RUNNING, PROMOTE_FAILED
from forkhorse.wiring.aws import PROMOTE_ACQUIRE_SECONDS

from tests.support.promote import (
    FAILING,
    OWNER,
    PASSING,
    ROOT,
    AwsWorld,
    Crash,
)
from tests.support.status import http_status

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
    # One PromoteRun execution, each step invoked once: nothing waited in a Lambda.
    assert aws_world.execution(pending["id"])["status"] == "SUCCEEDED"
    steps = [name for name in aws_world.invoked if name.startswith("promote_")]
    assert steps == [
        "promote_acquire",
        "promote_start_run",
        "promote_verify",
        "promote_write",
        "promote_release",
    ]
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

    code, body = _promote(aws_world, review_id, commit)
    assert code == 202, body
    assert aws_world.settle(review_id) == (409, CHECKS_FAILED)

    fresh = aws_world.service()
    answer = fresh.promotions.status(OWNER, aws_world.project_id, review_id)
    assert (http_status(answer), answer.body.model_dump(mode="json")) == (409, CHECKS_FAILED)
    [promotion] = aws_world.promotions(review_id)
    assert promotion.state == "failed"
    assert promotion.refusal is not None
    assert (promotion.refusal.kind, promotion.refusal.error) == ("conflict", CHECKS_FAILED["error"])
    # The failed before-promote summary stays visible; canonical did not move.
    summary = aws_world.summary(review_id)
    assert summary is not None
    assert (summary.trigger, summary.status) == ("before-promote", "failed")
    assert aws_world.canonical() == initial
    assert aws_world.store.ledger(aws_world.project_id) == []
    assert aws_world.store.open_promotion(aws_world.project_id) is None


def test_a_write_lambda_that_dies_after_the_canonical_write_promotes_once(
    aws_world: AwsWorld,
) -> None:
    """The Catch hands the dead step to Settle, which finds the promotion done and only
    releases the lease: one fast-forward, one ledger entry, a 200."""
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, PASSING)
    review_id = aws_world.approved(lane, commit)

    def crash() -> None:
        raise Crash("the write step's Lambda died after its work")

    aws_world.after["promote_write"] = crash
    status, body = _promote(aws_world, review_id, commit)
    assert status == 202, body
    status, body = aws_world.settle(review_id)
    assert status == 200, body
    assert aws_world.canonical() == commit
    assert len(aws_world.store.ledger(aws_world.project_id)) == 1
    assert aws_world.store.open_promotion(aws_world.project_id) is None
    # The 200 is readable once Write settled; Settle runs after it: wait for the end.
    [promotion] = aws_world.store.list_promotions(aws_world.project_id)
    assert aws_world.execution(promotion.id)["status"] == "SUCCEEDED"
    assert "promote_settle" in aws_world.invoked
    assert aws_world.store.acquire_lease(
        aws_world.project_id, "probe", timedelta(seconds=1), aws_world.clock.now()
    ), "Settle released the lease"


def test_the_history_shows_the_promote_execution(aws_world: AwsWorld) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, PASSING)
    review_id = aws_world.approved(lane, commit)
    assert _promote(aws_world, review_id, commit)[0] == 202
    assert aws_world.settle(review_id)[0] == 200
    status, body = aws_world.call("GET", f"{aws_world.promotion_path(review_id)}/history")
    assert status == 200, body
    promote = body["promote"]
    assert promote["state"] == "done"
    # On AWS the promote block names its PromoteRun execution and links its console page.
    machine = aws_world.promote_machine.replace(":stateMachine:", ":execution:")
    assert promote["executionArn"] == f"{machine}:{promote['promotionId']}"
    assert promote["consoleUrl"].endswith(f"#/v2/executions/details/{promote['executionArn']}")
    types = [event["type"] for event in promote["events"]]
    assert types[0] == "ExecutionStarted"
    assert types[-1] == "ExecutionSucceeded"
    entered = [
        event["stateEnteredEventDetails"]["name"]
        for event in promote["events"]
        if event["type"].endswith("StateEntered")
    ]
    assert entered == [
        "Acquire",
        "StartRun",
        "Mode",
        "BeforePromoteRun",
        "Verify",
        "Write",
        "Release",
    ]
    # The receipt run beside it is the nested before-promote execution.
    assert body["executionArn"].rsplit(":", 1)[-1] == aws_world.summary_generation(review_id)


def test_a_queued_promotion_outlives_acquires_lease_busy_retries() -> None:
    """Past PROMOTE_ACQUIRE_SECONDS a promotion that never took the lease reads as stopped;
    Acquire's backoff on LeaseBusy must end (and settle) well before that."""
    states = json.loads((ROOT / "statemachine/promote.asl.json").read_text())["States"]
    [busy] = [r for r in states["Acquire"]["Retry"] if r["ErrorEquals"] == ["LeaseBusy"]]
    delays = [
        min(busy["IntervalSeconds"] * busy["BackoffRate"] ** n, busy["MaxDelaySeconds"])
        for n in range(busy["MaxAttempts"])
    ]
    assert sum(delays) < PROMOTE_ACQUIRE_SECONDS / 2


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


def test_a_promote_that_cannot_start_fails_and_leaves_the_review_free(
    aws_world: AwsWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, PASSING)
    review_id = aws_world.approved(lane, commit)
    machine = aws_world.promote_machine
    monkeypatch.setenv("PROMOTE_STATE_MACHINE_ARN", "")
    with pytest.raises(RuntimeError, match="PROMOTE_STATE_MACHINE_ARN"):
        _promote(aws_world, review_id, commit)
    [failed] = aws_world.promotions(review_id)
    assert failed.state == "failed"
    path = f"{aws_world.promotion_path(review_id)}/promotion"
    assert aws_world.call("GET", path) == (409, {"error": PROMOTE_FAILED})

    monkeypatch.setenv("PROMOTE_STATE_MACHINE_ARN", machine)
    assert _promote(aws_world, review_id, commit)[0] == 202
    assert aws_world.settle(review_id)[0] == 200
    assert aws_world.canonical() == commit
