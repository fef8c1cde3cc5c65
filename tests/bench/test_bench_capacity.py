"""The measurements behind docs/capacity.md: one receipt run (three quick checks and a full
check, the issue's typical review) and
one promote (with its before-promote run), through the real ASL on moto's Step Functions and
the real handlers on moto's DynamoDB. Prints the AWS requests, DynamoDB units, items and
bytes, Lambda invocations and state transitions each flow costs."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from tests.integration.runner.scenarios import checks_file, full, quick
from tests.support.aws_prices import review_bill
from tests.support.aws_usage import Usage, counting_aws_calls, state_transitions
from tests.support.promote import OWNER, QUICK_OK, AwsWorld
from tests.support.step_functions import REGION

pytestmark = pytest.mark.bench
FILES: dict[str, str | bytes] = {
    ".forkhorse/checks": checks_file(
        *(quick(f"quick-{index}", "check") for index in range(3)), full("full", "true")
    ),
    ".forkhorse/quick/check.py": QUICK_OK,
}


def _table_items(world: AwsWorld) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name=REGION)
    pages = client.get_paginator("scan").paginate(TableName=world.store._table)
    return [item for page in pages for item in page["Items"]]


def _report(name: str, usage: Usage, invoked: list[str], transitions: list[int]) -> dict[str, Any]:
    figures = {
        "flow": name,
        "dynamodb_calls": usage.dynamodb_calls(),
        "dynamodb_write_units": usage.write_units,
        "dynamodb_read_units": usage.read_units,
        "items_written": usage.items_written,
        "bytes_written": usage.bytes_written,
        "lambda_invocations": len(invoked),
        "state_transitions": transitions,
        "calls": dict(sorted(usage.calls.items())),
    }
    print(f"\n[capacity] {json.dumps(figures)}")
    return figures


def _transitions(world: AwsWorld) -> dict[str, list[int]]:
    client = boto3.client("stepfunctions", region_name=REGION)
    return {
        machine["name"]: state_transitions(client, machine["stateMachineArn"])
        for machine in client.list_state_machines()["stateMachines"]
    }


def test_what_one_receipt_run_and_one_promote_cost_on_aws(
    aws_world: AwsWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane = aws_world.lane("agent")
    commit = aws_world.push(lane, FILES)
    before = len(_table_items(aws_world))

    with counting_aws_calls(monkeypatch) as review_usage:
        review_id = (
            aws_world.service()
            .reviews.request(
                lane.agent, aws_world.project_id, lane.packet_id, lane.fork_id, commit, False
            )
            .review.id
        )
        with review_usage.uncounted():
            aws_world.wait_receipt(review_id)
        aws_world.service().approvals.approve(OWNER, aws_world.project_id, review_id, commit)
    review_usage.bill_updates(_table_items(aws_world))
    assert aws_world.summary(review_id).status == "passed"  # type: ignore[union-attr]
    invoked_by_review = list(aws_world.invoked)
    review_transitions = _transitions(aws_world)["ReceiptRun"]
    stored_after_review = len(_table_items(aws_world))

    aws_world.invoked.clear()
    path = f"{aws_world.promotion_path(review_id)}/promote"
    with counting_aws_calls(monkeypatch) as promote_usage:
        status, body = aws_world.call("POST", path, {"commit": commit})
        assert status == 202, body
        with promote_usage.uncounted():
            assert aws_world.settle(review_id)[0] == 200
    promote_usage.bill_updates(_table_items(aws_world))
    assert aws_world.canonical() == commit
    transitions = _transitions(aws_world)

    review = _report("receipt run", review_usage, invoked_by_review, review_transitions)
    promote = _report(
        "promote",
        promote_usage,
        aws_world.invoked,
        transitions["PromoteRun"] + transitions["ReceiptRun"][len(review_transitions) :],
    )
    print(f"[capacity] items stored: before {before}, after the review {stored_after_review}")
    assert review["items_written"] > 0
    assert promote["lambda_invocations"] >= 5
    _typical_review(review)


# The targets for the typical review (three quick checks, one full check).
MAX_TRANSITIONS = 22
MAX_INVOCATIONS = 10
MAX_COST = 0.0035


def _typical_review(review: dict[str, Any]) -> None:
    """The rows `make bench` prints for the typical review, each with its target."""
    transitions = sum(review["state_transitions"])
    invocations = review["lambda_invocations"]
    bills = {
        architecture: review_bill(
            transitions=transitions,
            invocations=invocations,
            write_units=review["dynamodb_write_units"],
            read_units=review["dynamodb_read_units"],
            quick_checks=3,
            full_checks=1,
            architecture=architecture,
        )
        for architecture in ("arm64", "x86_64")
    }
    print(f"state transitions per typical review: {transitions} (target ≤ {MAX_TRANSITIONS})")
    print(f"Lambda invocations per typical review: {invocations} (target ≤ {MAX_INVOCATIONS})")
    for architecture, bill in bills.items():
        parts = ", ".join(f"{name} {value:.5f}" for name, value in vars(bill).items())
        print(
            f"cost per typical review ($), {architecture}: {bill.total:.4f}"
            f" (target ≤ {MAX_COST}; {parts})"
        )
    assert transitions <= MAX_TRANSITIONS
    assert invocations <= MAX_INVOCATIONS
    assert bills["arm64"].total <= MAX_COST
