"""Approve: owner consent for one exact commit. In required mode the gate accepts only
fresh, passing, real evidence (mocked evidence never passes); in advisory mode receipts
never gate. The console's gate view lists exactly the reasons approve refuses with."""

from __future__ import annotations

from datetime import timedelta

import pytest
from forkhorse.service.approvals import GATE_REFUSED
from forkhorse.service.errors import Forbidden, ServiceError
from forkhorse.service.reviews import reserve_run

from tests.support.service import CLAIM_TTL, FULL_FAILING, PASSING, QUICK_FAILING, Fast, wire
from tests.support.status import http_status

MOCKED = [
    "mocked-container-port: The evidence was produced on a mock (mocked-container-port); "
    "only real evidence passes.",
    "mocked-worker-loader: Check quick ran on a mock (mocked-worker-loader); "
    "only real evidence passes.",
    "mocked-container-port: Check full ran on a mock (mocked-container-port); "
    "only real evidence passes.",
]
FAILED = ["failed: The checks ended failed."]


def _refused(fast: Fast, project: str, review_id: str, commit: str) -> tuple[int, object]:
    with pytest.raises(ServiceError) as refused:
        fast.service.approvals.approve(fast.owner, project, review_id, commit)
    return http_status(refused.value), wire(refused.value.body())


def test_mocked_passing_evidence_never_satisfies_the_required_gate(fast: Fast) -> None:
    project = fast.project(True)
    commit, review_id = fast.reviewed(project, fast.lane(project), PASSING)
    assert fast.review(project, review_id)["receipt"]["status"] == "passed"
    assert _refused(fast, project, review_id, commit) == (
        409,
        {"error": GATE_REFUSED, "reasons": MOCKED},
    )
    assert fast.review(project, review_id)["approval"] is None


@pytest.mark.parametrize("files", [QUICK_FAILING, FULL_FAILING], ids=["quick", "full"])
def test_failed_evidence_is_refused_with_its_reason(
    fast: Fast, files: dict[str, str | bytes]
) -> None:
    project = fast.project(True)
    commit, review_id = fast.reviewed(project, fast.lane(project), files)
    assert fast.review(project, review_id)["receipt"]["status"] == "failed"
    assert _refused(fast, project, review_id, commit) == (
        409,
        {"error": GATE_REFUSED, "reasons": FAILED},
    )


def test_the_gate_view_lists_exactly_what_approve_refuses_with(fast: Fast) -> None:
    project = fast.project(True)
    commit, review_id = fast.reviewed(project, fast.lane(project), FULL_FAILING)
    gate = wire(fast.service.inspection.gate(fast.owner, project, review_id))
    assert (gate["mode"], gate["commit"]) == ("required", commit)
    assert gate["approve"] == {"allowed": False, "reasons": FAILED}
    assert gate["promote"] == {
        "allowed": False,
        "reasons": ["consent: The owner has not approved this review."],
    }
    # Advisory mode ignores the failure: the same review's gate opens for approve.
    fast.service.projects.set_settings(fast.owner, project, False)
    gate = wire(fast.service.inspection.gate(fast.owner, project, review_id))
    assert (gate["mode"], gate["approve"]) == ("advisory", {"allowed": True, "reasons": []})
    fast.service.approvals.approve(fast.owner, project, review_id, commit)
    gate = wire(fast.service.inspection.gate(fast.owner, project, review_id))
    assert gate["approve"] == {"allowed": False, "reasons": ["This commit is already approved."]}
    assert gate["promote"] == {"allowed": True, "reasons": []}


def test_advisory_mode_approves_failed_evidence_and_binds_the_digest_known(fast: Fast) -> None:
    project = fast.project(False)
    commit, review_id = fast.reviewed(project, fast.lane(project), FULL_FAILING)
    receipt = fast.review(project, review_id)["receipt"]
    approval = wire(fast.service.approvals.approve(fast.owner, project, review_id, commit))[
        "approval"
    ]
    assert (approval["mode"], approval["commit"], approval["digest"]) == (
        "advisory",
        commit,
        receipt["digest"],
    )
    assert fast.review(project, review_id)["approval"] == approval


def test_consent_is_for_the_reviews_commit_and_the_forks_head(fast: Fast) -> None:
    project = fast.project(False)
    lane = fast.lane(project)
    commit, review_id = fast.reviewed(project, lane, PASSING)
    other = fast.push(project, fast.lane(project), {"x.txt": "x\n"})
    assert _refused(fast, project, review_id, other) == (
        409,
        {"error": f"The review is at commit {commit}, not {other}."},
    )
    newer = fast.push(project, lane, {"more.txt": "later\n"})  # the review does not follow
    assert _refused(fast, project, review_id, commit) == (
        409,
        {"error": f"The fork's head is {newer}, not commit {commit}."},
    )


def test_an_expired_claim_blocks_approval_until_the_agent_claims_again(fast: Fast) -> None:
    project = fast.project(False)
    lane = fast.lane(project)
    commit, review_id = fast.reviewed(project, lane, PASSING)
    fast.clock.advance(CLAIM_TTL + timedelta(minutes=1))
    assert _refused(fast, project, review_id, commit) == (
        409,
        {"error": "The agent's claim on the review's packet is not live."},
    )
    fast.service.projects.claim(lane.agent, project, lane.packet_id)
    fast.service.approvals.approve(fast.owner, project, review_id, commit)


def test_a_second_approval_of_the_same_commit_is_a_conflict(fast: Fast) -> None:
    project = fast.project(False)
    commit, review_id = fast.reviewed(project, fast.lane(project), PASSING)
    fast.service.approvals.approve(fast.owner, project, review_id, commit)
    assert _refused(fast, project, review_id, commit) == (
        409,
        {"error": "This commit is already approved."},
    )


def test_only_an_owner_approves(fast: Fast) -> None:
    project = fast.project(False)
    lane = fast.lane(project)
    commit, review_id = fast.reviewed(project, lane, PASSING)
    with pytest.raises(Forbidden) as refused:
        fast.service.approvals.approve(lane.agent, project, review_id, commit)
    assert wire(refused.value.body()) == {"error": "Only an owner may approve reviews."}
    assert fast.review(project, review_id)["approval"] is None


def test_a_run_still_going_is_an_incomplete_reason_not_a_wait(fast: Fast) -> None:
    project = fast.project(True)
    commit, review_id = fast.reviewed(project, fast.lane(project), PASSING)
    # A fresh generation made current and not yet finished, as while its checks run.
    reserve_run(fast.service.context, fast.stored_review(review_id), commit, "review-created")
    still_running = ["incomplete: The checks are still running."]
    gate = wire(fast.service.inspection.gate(fast.owner, project, review_id))
    assert gate["approve"] == {"allowed": False, "reasons": still_running}
    assert _refused(fast, project, review_id, commit) == (
        409,
        {"error": GATE_REFUSED, "reasons": still_running},
    )
