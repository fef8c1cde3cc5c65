"""A PromoteRun execution that dies without reaching Settle (stopped, as an operator's
StopExecution or a state-machine timeout ends it): RunRecoveryFunction, fed the status
change EventBridge sends for it, settles the promotion and frees the project's lease.

The real PromoteRun ASL runs under moto with the real step handlers (see conftest); the
execution is stopped right after a chosen step's Lambda returns, so moto's interpreter ends
it ABORTED before the next state; the event carries moto's own description of it."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.service.promote.request import JOB_STOPPED, NOT_LANDED

from tests.support.aws import load_function
from tests.support.lambda_context import FakeLambdaContext
from tests.support.promote import (
    PASSING,
    ROOT,
    AwsWorld,
    _capability,
)
from tests.support.step_functions import REGION


def _promote(world: AwsWorld, review_id: str, commit: str) -> str:
    """Request the promote (202: it outlasts the request) and return the promotion's id."""
    path = f"{world.promotion_path(review_id)}/promote"
    status, body = world.call("POST", path, {"commit": commit})
    assert status == 202, body
    return str(body["promotion"]["id"])


def _stop_after(world: AwsWorld, step: str) -> None:
    """Stop the promote's execution once `step`'s Lambda has done its work."""

    def stop() -> None:
        [queued] = [p for p in world.store.list_promotions(world.project_id) if p.state != "failed"]
        boto3.client("stepfunctions", region_name=REGION).stop_execution(
            executionArn=_arn(world, queued.id), error="Stopped", cause="An operator stopped it."
        )

    world.after[step] = stop


def _arn(world: AwsWorld, promotion_id: str) -> str:
    prefix, _, name = world.promote_machine.rpartition(":stateMachine:")
    return f"{prefix}:execution:{name}:{promotion_id}"


def _status_change(world: AwsWorld, promotion_id: str) -> dict[str, Any]:
    """The event EventBridge delivers for the ended execution, from moto's description."""
    described = world.execution(promotion_id)
    assert described["status"] == "ABORTED", described
    event: dict[str, Any] = json.loads((ROOT / "events/sfn_status_change.json").read_text())
    detail = {key: described[key] for key in ("executionArn", "stateMachineArn", "name")}
    event["detail"] |= detail | {"status": "ABORTED", "input": described["input"]}
    event["resources"] = [described["executionArn"]]
    return event


def _recover(world: AwsWorld, promotion_id: str) -> dict[str, Any]:
    """The real RunRecoveryFunction handler, in a fresh container."""
    event = _status_change(world, promotion_id)
    answer: dict[str, Any] = load_function("run_recovery").handler(event, FakeLambdaContext())
    return answer


def _lease_is_free(world: AwsWorld) -> bool:
    ttl = timedelta(seconds=1)
    token = world.store.acquire_lease(world.project_id, "probe", ttl, world.clock.now())
    if token is not None:
        world.store.release_lease(world.project_id, "probe", token)
    return token is not None


def _refusal(world: AwsWorld, review_id: str) -> tuple[int, Any]:
    return world.call("GET", f"{world.promotion_path(review_id)}/promotion")


def _stopped_promote(world: AwsWorld, step: str) -> tuple[str, str, str | None, str]:
    """An approved review whose promote execution is stopped right after `step`: its
    commit, review, canonical head before, and promotion."""
    lane = world.lane("agent")
    commit = world.push(lane, PASSING)
    review_id = world.approved(lane, commit)
    initial = world.canonical()
    _stop_after(world, step)
    return commit, review_id, initial, _promote(world, review_id, commit)


def test_a_promote_stopped_while_pending_fails_as_stopped_and_frees_the_lease(
    aws_world: AwsWorld,
) -> None:
    commit, review_id, initial, promotion_id = _stopped_promote(aws_world, "promote_acquire")
    event = _status_change(aws_world, promotion_id)
    # Dead but unsettled: it holds the lease and fences the project.
    assert aws_world.store.open_promotion(aws_world.project_id) is not None
    assert not _lease_is_free(aws_world)

    assert load_function("run_recovery").handler(event, FakeLambdaContext()) == {
        "promotion": "failed"
    }
    assert _refusal(aws_world, review_id) == (409, {"error": JOB_STOPPED})
    assert aws_world.store.open_promotion(aws_world.project_id) is None
    assert _lease_is_free(aws_world)
    assert (aws_world.canonical(), aws_world.store.ledger(aws_world.project_id)) == (initial, [])
    # Idempotent: the same event again changes nothing.
    assert _recover(aws_world, promotion_id) == {"promotion": "failed"}
    # Nothing is left in the way: a new promote of the review lands.
    aws_world.after.clear()
    _promote(aws_world, review_id, commit)
    status, body = aws_world.settle(review_id)
    assert status == 200, body
    assert [e.commit for e in aws_world.store.ledger(aws_world.project_id)] == [commit]


def test_a_promote_stopped_before_its_write_is_reconciled_as_not_landed(
    aws_world: AwsWorld,
) -> None:
    _, review_id, initial, promotion_id = _stopped_promote(aws_world, "promote_verify")
    aws_world.execution(promotion_id)  # ended
    writing = aws_world.store.get_promotion(aws_world.project_id, promotion_id)
    assert writing is not None
    assert writing.state == "writing"

    assert _recover(aws_world, promotion_id) == {"promotion": "failed"}
    assert _refusal(aws_world, review_id) == (409, {"error": NOT_LANDED})
    assert (aws_world.canonical(), aws_world.store.ledger(aws_world.project_id)) == (initial, [])
    assert _lease_is_free(aws_world)


def test_a_write_that_landed_before_the_execution_died_is_reconciled_as_done(
    aws_world: AwsWorld,
) -> None:
    """The compare-and-set landed but its Lambda died before recording it (here the test
    moves canonical itself, exactly as that write would): canonical's head decides."""
    commit, review_id, initial, promotion_id = _stopped_promote(aws_world, "promote_verify")
    aws_world.execution(promotion_id)  # ended
    repos = aws_world.runtime.git.store(aws_world.project_id)
    assert repos.update_canonical_ref(
        _capability(aws_world.project_id), DEFAULT_BRANCH, initial, commit
    )

    assert _recover(aws_world, promotion_id) == {"promotion": "done"}
    status, body = _refusal(aws_world, review_id)
    assert status == 200, body
    assert (body["promotion"]["from"], body["promotion"]["to"]) == (initial, commit)
    [entry] = aws_world.store.ledger(aws_world.project_id)
    assert (entry.commit, entry.previous_head, entry.promotion_id) == (
        commit,
        initial,
        promotion_id,
    )
    assert _lease_is_free(aws_world)


def test_the_sweeper_settles_a_stopped_promote_the_status_rule_missed(
    aws_world: AwsWorld,
) -> None:
    """No status-change event arrives (EventBridge dropped it): the 5-minute sweep lists
    PromoteRun's interrupted executions too, settles the promotion and frees the lease."""
    _, review_id, initial, promotion_id = _stopped_promote(aws_world, "promote_acquire")
    aws_world.execution(promotion_id)  # ended
    assert not _lease_is_free(aws_world)
    sweep = json.loads((ROOT / "events/recovery_sweep.json").read_text())

    answer = load_function("run_recovery").handler(sweep, FakeLambdaContext())

    assert answer["promotionsSettled"] == 1
    assert _refusal(aws_world, review_id) == (409, {"error": JOB_STOPPED})
    assert _lease_is_free(aws_world)
    assert (aws_world.canonical(), aws_world.store.ledger(aws_world.project_id)) == (initial, [])
    again = load_function("run_recovery").handler(sweep, FakeLambdaContext())
    assert again["promotionsSettled"] == 0, "a settled promotion is not settled again"
