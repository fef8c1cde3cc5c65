"""Whole flows over HTTP with real `git push` to forks, real quick and full checks: what
needs real evidence (required mode's approve and promote), real timing or real pushes. The
service's rules themselves (refusals and their sentences) are tested in tests/unit/service."""

from __future__ import annotations

import threading
from typing import Any

from tests.integration.api.support import PASSING, checks_files
from tests.support.live import Project, Server, new_lane

CHECKS_FAILED = {"error": "Checks failed before promote."}


def _path(project: Project, review_id: str) -> str:
    return f"/projects/{project.id}/reviews/{review_id}"


def _approve(server: Server, project: Project, review_id: str, commit: str) -> tuple[int, Any]:
    return server.owner.call("POST", f"{_path(project, review_id)}/approve", {"commit": commit})


def test_required_mode_approve_then_promote_on_a_fresh_run(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    commit, review = lane.reviewed(PASSING)
    assert review["receipt"]["status"] == "passed"
    assert review["receipt"]["trigger"] == "review-created"
    assert [c["runtime"] for c in review["receipt"]["checks"]] == ["dynamic-worker", "container"]
    status, approved = _approve(server, required, review["id"], commit)
    assert status == 200, approved
    assert approved["approval"]["mode"] == "required"
    assert approved["approval"]["digest"] == review["receipt"]["digest"]
    status, promoted = server.owner.promote(required.id, review["id"], commit)
    assert status == 200, promoted
    promotion = promoted["promotion"]
    assert set(promotion) == {"id", "links", "commit", "from", "to", "digest", "mode", "promotedAt"}
    # The promotion names its ledger entry and its signed VSA; both links answer.
    pid, base = promotion["id"], f"/projects/{required.id}"
    assert promotion["links"] == {
        "ledger": f"{base}/ledger/{pid}",
        "attestation": f"{base}/promotions/{pid}/attestation",
    }
    entry = server.owner.ok("GET", promotion["links"]["ledger"])["entry"]
    assert (entry["promotionId"], entry["commit"], entry["digest"]) == (
        pid,
        commit,
        promotion["digest"],
    )
    envelope = server.owner.ok("GET", promotion["links"]["attestation"])
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert server.owner.call("GET", f"{base}/ledger/promotion-unknown") == (
        404,
        {"error": "Ledger entry not found."},
    )
    assert (promotion["from"], promotion["to"], promotion["mode"]) == (
        required.initial,
        commit,
        "required",
    )
    state = server.owner.state(required.id)
    after = next(r for r in state["reviews"] if r["id"] == review["id"])
    # Promote reran the checks under a new generation; the ledger holds that fresh digest.
    assert after["receipt"]["trigger"] == "before-promote"
    assert after["receipt"]["digest"] == promotion["digest"] != review["receipt"]["digest"]
    assert state["ledger"][-1]["digest"] == promotion["digest"]
    assert state["project"]["canonicalHead"] == commit
    assert after["promotion"] == promotion
    record = server.owner.ok("GET", f"{_path(required, review['id'])}/receipt")
    assert record["digest"] == promotion["digest"]
    assert record["receipt"]["trigger"] == "before-promote"
    # Promoting the commit canonical already points at is refused; the ledger stays exact.
    status, again = server.owner.promote(required.id, review["id"], commit)
    assert (status, again) == (
        409,
        {"error": f"Canonical is already at commit {commit}; there is nothing to promote."},
    )
    assert server.owner.state(required.id)["ledger"] == state["ledger"]


def test_before_promote_failure_after_a_passing_review_is_the_exact_409(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    registry = server.app.runtime.images
    registry.record("flaky", registry.resolve("busybox"))
    commit, review = lane.reviewed(
        {".forkhorse/checks": '[{"name":"t","tier":"full","image":"flaky","run":"true"}]'}
    )
    assert _approve(server, required, review["id"], commit)[0] == 200
    # The image is no longer resolvable: the fresh run fails closed.
    registry.record("flaky", "localhost/forkhorse/flaky@sha256:" + "0" * 64)
    status, body = server.owner.promote(required.id, review["id"], commit)
    assert (status, body) == (409, CHECKS_FAILED)
    after = server.owner.review(required.id, review["id"])
    assert after["receipt"]["status"] == "infrastructure-error"


def test_concurrent_promotes_are_serialized_by_the_workflow_mutex(
    server: Server, required: Project
) -> None:
    first, second = new_lane(required, "first"), new_lane(required, "second")
    slow = checks_files("sleep 1")
    commit_a, review_a = first.reviewed(slow)
    # The second fork carries a child of the first commit, so both can fast-forward in order.
    second.tree.git(first.agent.token, "pull", "-q", first.fork["cloneUrl"], "main")
    commit_b = second.push({"second.txt": "b\n"})
    review_b = second.request_review(commit_b)
    review_b = server.owner.wait_receipt(required.id, review_b["id"])
    for review, commit in ((review_a, commit_a), (review_b, commit_b)):
        assert _approve(server, required, review["id"], commit)[0] == 200
    results: dict[str, tuple[int, Any]] = {}

    def promote(review_id: str, commit: str) -> None:
        results[review_id] = server.owner.promote(required.id, review_id, commit)

    threads = [
        threading.Thread(target=promote, args=(review_a["id"], commit_a)),
        threading.Thread(target=promote, args=(review_b["id"], commit_b)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(status for status, _ in results.values())
    assert statuses in ([200, 200], [200, 409]), results
    state = server.owner.state(required.id)
    runs = [
        r["receipt"]
        for r in state["reviews"]
        if r["id"] in results and r["receipt"]["trigger"] == "before-promote"
    ]
    # Each before-promote run happened inside the mutex: their intervals never overlap.
    if len(runs) == 2:
        early, late = sorted(runs, key=lambda receipt: receipt["startedAt"])
        assert early["finishedAt"] <= late["startedAt"]
    assert len(state["ledger"]) == statuses.count(200)
    assert state["project"]["canonicalHead"] in (commit_a, commit_b)


def test_a_promote_that_outlasts_the_request_answers_202_then_settles(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    commit, review = lane.reviewed(checks_files("sleep 6", quick=False))
    assert _approve(server, required, review["id"], commit)[0] == 200
    path = _path(required, review["id"])
    status, body = server.owner.call("POST", f"{path}/promote", {"commit": commit})
    assert status == 202, body
    assert body["promotion"]["state"] == "pending"
    status, body = server.owner.promote(required.id, review["id"], commit)
    assert status == 409  # the same job is still running
    status, body = server.owner.call("GET", f"{path}/promotion")
    while status == 202:
        status, body = server.owner.call("GET", f"{path}/promotion")
    assert status == 200, body
    assert body["promotion"]["to"] == commit


def test_follow_pushes_moves_the_review_and_clears_consent(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    commit = lane.push(PASSING)
    review = lane.request_review(commit, follow=True)
    server.owner.wait_receipt(required.id, review["id"])
    assert _approve(server, required, review["id"], commit)[0] == 200
    newer = lane.push({"next.txt": "next\n"})
    moved = server.owner.review(required.id, review["id"])
    assert moved["commit"] == newer
    assert moved["approval"] is None  # consent belongs to one commit
    assert moved["receipt"]["trigger"] == "review-created"
    settled = server.owner.wait_receipt(required.id, review["id"])
    assert settled["receipt"]["status"] == "passed"
    assert settled["receipt"]["digest"] != review["receipt"]["digest"]
    status, body = _approve(server, required, review["id"], commit)
    assert status == 409
    assert body["error"] == f"The review is at commit {newer}, not {commit}."
    # Without a live claim, a push moves nothing.
    lane.agent.ok("DELETE", f"/projects/{required.id}/packets/{lane.packet}/claim")
    latest = lane.push({"late.txt": "late\n"})
    assert server.owner.review(required.id, review["id"])["commit"] == newer != latest
