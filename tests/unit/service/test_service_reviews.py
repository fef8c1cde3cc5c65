"""Requesting a review: the authority checks in order, each with its own sentence; the
quick gate; what the receipt shows and who may read the record; followed pushes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from forkhorse.service.errors import Conflict, Forbidden, NotFound, ServiceError
from forkhorse.service.reviews import NO_RECEIPT

from tests.support.service import CLAIM_TTL, PASSING, QUICK_FAILING, Fast, wire
from tests.support.status import http_status


def _refusal(error: pytest.ExceptionInfo[ServiceError]) -> tuple[int, dict[str, object]]:
    return http_status(error.value), wire(error.value.body())


def test_an_agent_outside_the_project_cannot_request_a_review(fast: Fast) -> None:
    project = fast.project(True)
    lane = fast.lane(project)
    commit = fast.push(project, lane, PASSING)
    stranger = fast.agent(fast.project(True))
    with pytest.raises(Forbidden) as refused:
        fast.service.reviews.request(stranger, project, lane.packet_id, lane.fork_id, commit, False)
    assert _refusal(refused) == (403, {"error": "This agent is not a member of the project."})


def test_an_agent_may_review_only_its_own_fork(fast: Fast) -> None:
    project = fast.project(True)
    owner_of_fork, other = fast.lane(project), fast.lane(project)
    commit = fast.push(project, owner_of_fork, PASSING)
    with pytest.raises(Forbidden) as refused:
        fast.service.reviews.request(
            other.agent, project, other.packet_id, owner_of_fork.fork_id, commit, False
        )
    assert _refusal(refused) == (
        403,
        {"error": "Agents may request reviews only of forks they own."},
    )


def test_unknown_forks_and_packets_are_404s(fast: Fast) -> None:
    project = fast.project(True)
    lane = fast.lane(project)
    commit = fast.push(project, lane, PASSING)
    request = fast.service.reviews.request
    with pytest.raises(NotFound) as no_fork:
        request(lane.agent, project, lane.packet_id, "no-such-fork", commit, False)
    with pytest.raises(NotFound) as no_packet:
        request(lane.agent, project, "no-such-packet", lane.fork_id, commit, False)
    assert _refusal(no_fork) == (404, {"error": "Fork not found."})
    assert _refusal(no_packet) == (404, {"error": "Packet not found."})
    assert fast.state(project)["reviews"] == []


def test_a_review_needs_the_agents_own_live_claim(fast: Fast) -> None:
    project = fast.project(True)
    lane, other = fast.lane(project), fast.lane(project)
    commit = fast.push(project, lane, PASSING)
    no_claim = "This agent holds no live claim on the packet; claim it first."
    with pytest.raises(Conflict) as someone_elses:
        fast.service.reviews.request(
            lane.agent, project, other.packet_id, lane.fork_id, commit, False
        )
    assert _refusal(someone_elses) == (409, {"error": no_claim})
    fast.clock.advance(CLAIM_TTL + timedelta(seconds=1))
    with pytest.raises(Conflict) as expired:
        fast.request(project, lane, commit)
    assert _refusal(expired) == (409, {"error": no_claim})
    fast.service.projects.claim(lane.agent, project, lane.packet_id)  # renewing is claiming
    assert fast.review(project, fast.request(project, lane, commit))["commit"] == commit


def test_only_the_forks_current_head_can_be_reviewed(fast: Fast) -> None:
    project = fast.project(True)
    lane = fast.lane(project)
    older = fast.push(project, lane, PASSING)
    newer = fast.push(project, lane, {"more.txt": "later\n"})
    with pytest.raises(Conflict) as stale:
        fast.request(project, lane, older)
    assert _refusal(stale) == (
        409,
        {"error": f"The commit is not the fork's current head ({newer})."},
    )
    assert fast.state(project)["reviews"] == []


def test_a_failing_quick_check_closes_the_gate_before_any_container(fast: Fast) -> None:
    project = fast.project(True)
    _, review_id = fast.reviewed(project, fast.lane(project), QUICK_FAILING)
    receipt = fast.review(project, review_id)["receipt"]
    assert receipt["status"] == "failed"
    assert [(c["name"], c["outcome"], c.get("message")) for c in receipt["checks"]] == [
        ("quick-fails", "failed", "Mocked quick check."),
        ("full", "failed", "Skipped: a quick check failed."),
    ]
    assert fast.containers.started == []


def test_a_passing_run_attaches_a_record_only_the_owner_reads(fast: Fast) -> None:
    project = fast.project(True)
    lane = fast.lane(project)
    commit, review_id = fast.reviewed(project, lane, PASSING)
    receipt = fast.review(project, review_id)["receipt"]
    assert (receipt["status"], receipt["trigger"]) == ("passed", "review-created")
    assert [c["runtime"] for c in receipt["checks"]] == ["dynamic-worker", "container"]
    record = wire(fast.service.reviews.receipt(fast.owner, project, review_id))
    assert record["digest"] == receipt["digest"]
    assert record["receipt"]["commit"] == commit
    with pytest.raises(Forbidden) as agent:
        fast.service.reviews.receipt(lane.agent, project, review_id)
    assert _refusal(agent) == (403, {"error": "Only an owner may read receipt records."})


def test_a_commit_without_checks_reads_receipt_null_and_has_no_record(fast: Fast) -> None:
    project = fast.project(False)
    commit, review_id = fast.reviewed(project, fast.lane(project), {"notes.txt": "none\n"})
    review = fast.review(project, review_id)
    assert (review["receipt"], review["commit"]) == (None, commit)
    with pytest.raises(NotFound) as missing:
        fast.service.reviews.receipt(fast.owner, project, review_id)
    assert _refusal(missing) == (404, {"error": NO_RECEIPT})


def test_follow_pushes_moves_the_review_and_clears_consent(fast: Fast) -> None:
    project = fast.project(False)
    lane = fast.lane(project)
    commit = fast.push(project, lane, PASSING)
    review_id = fast.request(project, lane, commit, follow=True)
    first = fast.review(project, review_id)["receipt"]
    fast.service.approvals.approve(fast.owner, project, review_id, commit)
    newer = fast.push(project, lane, {"next.txt": "next\n"})
    moved = fast.review(project, review_id)
    assert (moved["commit"], moved["approval"]) == (newer, None)  # consent is per commit
    assert moved["receipt"]["status"] == "passed"
    assert moved["receipt"]["digest"] != first["digest"]
    with pytest.raises(Conflict) as stale:
        fast.service.approvals.approve(fast.owner, project, review_id, commit)
    assert _refusal(stale) == (409, {"error": f"The review is at commit {newer}, not {commit}."})
    # Without a live claim, a push moves nothing.
    fast.service.projects.release(lane.agent, project, lane.packet_id)
    latest = fast.push(project, lane, {"late.txt": "late\n"})
    assert fast.review(project, review_id)["commit"] == newer != latest
