"""The protected-checks policy in advisory mode: the gate shows how the commit's checks
differ from canonical's, and nothing blocks."""

from __future__ import annotations

from tests.support.service import Fast, checks, wire
from tests.support.status import http_status

MODULE = ".forkhorse/quick/quick.py"


def test_advisory_mode_shows_the_checks_diff_but_never_blocks(fast: Fast) -> None:
    project = fast.project(False, checks(("quick", "quick")))
    fast.service.projects.set_policy(fast.owner, project, True)
    lane = fast.lane(project)
    replaced = "def check(ctx):\n    return {'ok': True, 'message': 'always'}\n"
    commit, review_id = fast.reviewed(project, lane, {MODULE: replaced})
    gate = wire(fast.service.inspection.gate(fast.owner, project, review_id))
    assert gate["checks"]["enforced"] is False
    assert [(d["check"], d["change"]) for d in gate["checks"]["diff"]] == [("quick", "changed")]
    assert gate["approve"] == {"allowed": True, "reasons": []}
    approval = wire(fast.service.approvals.approve(fast.owner, project, review_id, commit))
    assert approval["approval"]["acceptedChecksChange"] == []
    answer = fast.service.promotions.promote(fast.owner, project, review_id, commit)
    assert http_status(answer) == 200, answer.body
    assert fast.canonical(project) == commit
