"""Flow-Next review receipts on a review: only the requesting agent attaches them, an
invalid one is refused with its rule and pointer and changes nothing, attaching the same
receipt again is free, and owners and member agents read the classified lineage."""

from __future__ import annotations

import pytest
from forkhorse.service.errors import ServiceError

from tests.support.service import PASSING, Fast, wire
from tests.support.status import http_status

RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}


def test_the_requesting_agent_attaches_and_everyone_allowed_reads_it(fast: Fast) -> None:
    project = fast.project(False)
    lane, other = fast.lane(project), fast.lane(project)
    _, review_id = fast.reviewed(project, lane, PASSING)
    receipts = fast.service.reviews
    attached = wire(receipts.add_review_receipt(lane.agent, project, review_id, dict(RECEIPT)))
    assert attached["classification"]["valid"] is True
    again = wire(receipts.add_review_receipt(lane.agent, project, review_id, dict(RECEIPT)))
    assert again["digest"] == attached["digest"]
    for reader in (fast.owner, lane.agent):
        listing = wire(receipts.list_review_receipts(reader, project, review_id))
        assert [(e["digest"], e["receipt"]) for e in listing["receipts"]] == [
            (attached["digest"], RECEIPT)
        ]
    # Another member agent does not see an unpublished review, nor its findings.
    for attempt in (
        lambda: receipts.list_review_receipts(other.agent, project, review_id),
        lambda: receipts.add_review_receipt(other.agent, project, review_id, dict(RECEIPT)),
    ):
        with pytest.raises(ServiceError) as hidden:
            attempt()
        assert (http_status(hidden.value), wire(hidden.value.body())) == (
            404,
            {"error": "Review not found."},
        )


@pytest.mark.parametrize(
    ("body", "error", "reason"),
    [
        (
            {**RECEIPT, "verdict": "MAYBE"},
            "must be one of SHIP, NEEDS_WORK, MAJOR_RETHINK, NEEDS_HUMAN",
            "receipt.verdict at /verdict",
        ),
        (
            {"type": "nope"},
            "must be one of plan_review, impl_review, completion_review, qa_verdict",
            "receipt.type at /type",
        ),
    ],
    ids=["verdict", "type"],
)
def test_an_invalid_receipt_is_a_400_with_its_rule_and_changes_nothing(
    fast: Fast, body: dict[str, object], error: str, reason: str
) -> None:
    project = fast.project(False)
    lane = fast.lane(project)
    _, review_id = fast.reviewed(project, lane, PASSING)
    with pytest.raises(ServiceError) as refused:
        fast.service.reviews.add_review_receipt(lane.agent, project, review_id, body)
    assert (http_status(refused.value), wire(refused.value.body())) == (
        400,
        {"error": f"The review receipt is invalid: {error}", "reasons": [reason]},
    )
    assert wire(fast.service.reviews.list_review_receipts(fast.owner, project, review_id)) == {
        "receipts": []
    }
