"""Promote: the only path that writes canonical, fast-forward only. Required mode reruns the
checks under a new generation and answers exactly `409 {"error": "Checks failed before
promote."}` unless that fresh run is real passing evidence; advisory mode starts no checks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from forkhorse.domain.model import Promotion
from forkhorse.service.errors import CHECKS_FAILED_BEFORE_PROMOTE, ServiceError
from forkhorse.service.facade import Service
from forkhorse.service.promote.rules import ALREADY_RUNNING, CONSENT_MISSING, NO_PROMOTION

from tests.support.service import CLAIM_TTL, FULL_FAILING, PASSING, Fast, Lane, wire
from tests.support.status import http_status

CHECKS_FAILED = {"error": CHECKS_FAILED_BEFORE_PROMOTE}


def _approved(
    fast: Fast, project: str, lane: Lane, files: dict[str, str | bytes]
) -> tuple[str, str]:
    commit, review_id = fast.reviewed(project, lane, files)
    fast.service.approvals.approve(fast.owner, project, review_id, commit)
    return commit, review_id


def _promote(fast: Fast, project: str, review_id: str, commit: str) -> tuple[int, object]:
    """What the promote request answers (the orchestrator has run the workflow to its end)."""
    try:
        answer = fast.service.promotions.promote(fast.owner, project, review_id, commit)
    except ServiceError as refused:
        return http_status(refused), wire(refused.body())
    return http_status(answer), wire(answer.body)


def test_an_advisory_promote_fast_forwards_canonical_and_starts_no_checks(fast: Fast) -> None:
    project = fast.project(False)
    initial = fast.canonical(project)
    commit, review_id = _approved(fast, project, fast.lane(project), FULL_FAILING)
    before = fast.review(project, review_id)["receipt"]
    status, body = _promote(fast, project, review_id, commit)
    assert status == 200, body
    assert isinstance(body, dict)
    pid = body["promotion"]["id"]
    assert body == {
        "promotion": {
            "id": pid,
            "links": {
                "ledger": f"/projects/{project}/ledger/{pid}",
                "attestation": f"/projects/{project}/promotions/{pid}/attestation",
            },
            "commit": commit,
            "from": initial,
            "to": commit,
            "digest": before["digest"],
            "mode": "advisory",
            "promotedAt": "2026-11-02T09:00:00.000Z",
        }
    }
    state = fast.state(project)
    assert state["project"]["canonicalHead"] == fast.canonical(project) == commit
    assert [entry["digest"] for entry in state["ledger"]] == [before["digest"]]
    after = fast.review(project, review_id)
    assert after["receipt"] == before  # no run: failures stay visible, nothing reran
    assert after["promotion"] == body["promotion"]
    # Canonical is at the commit already: nothing to promote, and the ledger stays exact.
    assert _promote(fast, project, review_id, commit) == (
        409,
        {"error": f"Canonical is already at commit {commit}; there is nothing to promote."},
    )
    assert fast.state(project)["ledger"] == state["ledger"]


def test_promote_never_moves_canonical_but_forward(fast: Fast) -> None:
    project = fast.project(False)
    first, second = fast.lane(project), fast.lane(project)
    commit_a, review_a = _approved(fast, project, first, PASSING)
    commit_b, review_b = _approved(fast, project, second, PASSING)  # a sibling of commit_a
    assert _promote(fast, project, review_a, commit_a)[0] == 200
    assert _promote(fast, project, review_b, commit_b) == (
        409,
        {"error": f"Commit {commit_b} does not fast-forward canonical ({commit_a})."},
    )
    assert fast.canonical(project) == commit_a
    assert len(fast.state(project)["ledger"]) == 1


def test_promote_needs_the_owners_approval_of_the_exact_commit(fast: Fast) -> None:
    project = fast.project(False)
    commit, review_id = fast.reviewed(project, fast.lane(project), PASSING)
    assert _promote(fast, project, review_id, commit) == (
        409,
        {"error": CONSENT_MISSING, "reasons": ["consent: The owner has not approved this review."]},
    )
    assert fast.canonical(project) != commit


def test_an_expired_claim_blocks_promote(fast: Fast) -> None:
    project = fast.project(False)
    commit, review_id = _approved(fast, project, fast.lane(project), PASSING)
    fast.clock.advance(CLAIM_TTL + timedelta(minutes=1))
    assert _promote(fast, project, review_id, commit) == (
        409,
        {"error": "The agent's claim on the review's packet is not live."},
    )


@pytest.mark.parametrize(("files", "outcome"), [(PASSING, "passed"), (FULL_FAILING, "failed")])
def test_turning_the_requirement_on_gates_an_approved_review_with_the_exact_409(
    fast: Fast, files: dict[str, str | bytes], outcome: str
) -> None:
    """Mocked passing evidence fails the required gate as a failed run does."""
    project = fast.project(False)
    initial = fast.canonical(project)
    commit, review_id = _approved(fast, project, fast.lane(project), files)
    earlier = fast.review(project, review_id)["receipt"]
    fast.service.projects.set_settings(fast.owner, project, True)
    assert _promote(fast, project, review_id, commit) == (409, CHECKS_FAILED)
    # The refusal is kept with the promotion: the status answers it, in any process.
    context = fast.service.context
    other_process = Service(context.store, context.git, context.orchestrator, context.clock)
    answer = other_process.promotions.status(fast.owner, project, review_id)
    assert (http_status(answer), wire(answer.body)) == (409, CHECKS_FAILED)
    after = fast.review(project, review_id)
    # Promote reran the checks under a new generation; the before-promote summary stays.
    assert (after["receipt"]["trigger"], after["receipt"]["status"]) == ("before-promote", outcome)
    assert after["receipt"]["digest"] != earlier["digest"]
    assert after["promotion"] is None
    assert fast.canonical(project) == initial
    assert fast.state(project)["ledger"] == []


def test_a_live_promote_job_fences_a_second_request_and_reads_pending(fast: Fast) -> None:
    project = fast.project(False)
    commit, review_id = _approved(fast, project, fast.lane(project), PASSING)
    now = fast.clock.now()
    queued = Promotion(
        id="promotion-in-flight",
        project_id=project,
        review_id=review_id,
        commit=commit,
        state="queued",
        mode="advisory",
        started_at=now,
        deadline=now + timedelta(hours=1),
    )
    assert fast.runtime.store.request_promotion(queued, now)  # another request's job
    assert _promote(fast, project, review_id, commit) == (409, {"error": ALREADY_RUNNING})
    answer = fast.service.promotions.status(fast.owner, project, review_id)
    assert (http_status(answer), wire(answer.body)) == (
        202,
        {
            "promotion": {
                "id": "promotion-in-flight",
                "state": "pending",
                "commit": commit,
                "mode": "advisory",
            }
        },
    )


def test_a_review_never_promoted_has_no_promotion_and_agents_cannot_promote(fast: Fast) -> None:
    project = fast.project(False)
    lane = fast.lane(project)
    commit, review_id = _approved(fast, project, lane, PASSING)
    with pytest.raises(ServiceError) as missing:
        fast.service.promotions.status(fast.owner, project, review_id)
    assert (http_status(missing.value), wire(missing.value.body())) == (
        404,
        {"error": NO_PROMOTION},
    )
    with pytest.raises(ServiceError) as agent:
        fast.service.promotions.promote(lane.agent, project, review_id, commit)
    assert (http_status(agent.value), wire(agent.value.body())) == (
        403,
        {"error": "Only an owner may promote reviews."},
    )
    assert fast.canonical(project) != commit
