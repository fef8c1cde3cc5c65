"""The protected-checks policy over HTTP, with real pushes and real quick checks: an agent
that replaces a check with one that always passes gets `checks-changed`, and only the
owner's explicit acceptance of exactly that change lets it land."""

from __future__ import annotations

from typing import Any

from forkhorse.service.promote.rules import CHECKS_CHANGE_NOT_ACCEPTED

from tests.integration.api.support import QUICK_OK
from tests.support.live import (
    GUARD,
    GUARDED_MODULE,
    Lane,
    Project,
    Server,
    new_guarded_project,
    new_lane,
)

MODULE = GUARDED_MODULE
ALWAYS_PASSES = QUICK_OK
MODULE_CHANGED = "checks-changed: Check quick's module changed."


def _replace_the_check(lane: Lane, source: str = ALWAYS_PASSES) -> tuple[str, dict[str, Any]]:
    commit, review = lane.reviewed({MODULE: source, "src.txt": "work\n"})
    assert review["receipt"]["status"] == "passed", review["receipt"]
    return commit, review


def test_the_policy_shows_in_state_and_is_off_by_default(server: Server, required: Project) -> None:
    project = server.owner.state(required.id)["project"]
    assert (project["settings"], project["policy"]) == (
        {"requireReceipt": True},
        {"protectChecks": False},
    )
    path = f"/projects/{required.id}"
    assert server.owner.ok("PUT", path + "/policy", {"protectChecks": True}) == {
        "policy": {"protectChecks": True}
    }
    project = server.owner.state(required.id)["project"]
    assert project["policy"] == {"protectChecks": True}
    assert project["settings"] == {"requireReceipt": True}, "settings are untouched"
    lane = new_lane(required)
    status, _ = lane.agent.call("PUT", path + "/policy", {"protectChecks": False})
    assert status == 403
    assert lane.agent.state(required.id)["project"]["policy"] == {"protectChecks": True}


def test_a_replaced_check_is_refused_until_the_owner_accepts_that_change(server: Server) -> None:
    project = new_guarded_project(server)
    lane = new_lane(project)
    commit, review = _replace_the_check(lane)

    gate = server.owner.ok("GET", f"{project.review_path(review['id'])}/gate")
    assert gate["checks"]["enforced"] is True
    assert gate["checks"]["canonicalHead"] == project.initial
    [shown] = gate["checks"]["diff"]
    assert (shown["check"], shown["change"], shown["protected"]) == ("quick", "changed", True)
    assert shown["before"]["definition"] == shown["after"]["definition"]
    assert shown["before"]["moduleDigest"] != shown["after"]["moduleDigest"]
    assert gate["approve"] == {"allowed": False, "reasons": [MODULE_CHANGED]}

    approved = project.refused_until_accepted(review["id"], commit, [MODULE_CHANGED])
    [accepted] = approved["approval"]["acceptedChecksChange"]
    assert set(accepted) == {"check", "change", "before", "after"}
    assert (accepted["check"], accepted["change"]) == ("quick", "changed")
    assert accepted["before"] != accepted["after"]
    assert accepted["before"].startswith("sha256:")
    status, again = project.approve(review["id"], commit, True)
    assert (status, again) == (409, {"error": "This commit is already approved."})

    status, promoted = server.owner.promote(project.id, review["id"], commit)
    assert status == 200, promoted
    state = server.owner.state(project.id)
    assert state["project"]["canonicalHead"] == commit
    entry = state["ledger"][-1]
    assert entry["commit"] == commit
    assert entry["acceptedChecksChange"] == [accepted]
    after = next(r for r in state["reviews"] if r["id"] == review["id"])
    assert after["approval"]["acceptedChecksChange"] == [accepted]


def test_with_the_policy_off_the_spec_behaviour_is_unchanged(server: Server) -> None:
    """The default: a replaced check is the owner's to spot in the diff; nothing blocks."""
    required = new_guarded_project(server, protect_checks=False)
    lane = new_lane(required)
    commit, review = _replace_the_check(lane)
    gate = server.owner.ok("GET", f"{required.review_path(review['id'])}/gate")
    assert gate["checks"]["enforced"] is False
    assert [d["change"] for d in gate["checks"]["diff"]] == ["changed"]
    assert gate["approve"] == {"allowed": True, "reasons": []}
    status, approved = required.approve(review["id"], commit)
    assert status == 200, approved
    assert approved["approval"]["acceptedChecksChange"] == []
    status, promoted = server.owner.promote(required.id, review["id"], commit)
    assert status == 200, promoted
    assert server.owner.state(required.id)["ledger"][-1]["acceptedChecksChange"] == []


def test_turning_the_policy_on_after_approval_gates_promote_until_accepted(
    server: Server,
) -> None:
    required = new_guarded_project(server, protect_checks=False)
    lane = new_lane(required)
    commit, review = _replace_the_check(lane)
    assert required.approve(review["id"], commit)[0] == 200
    server.owner.ok("PUT", f"/projects/{required.id}/policy", {"protectChecks": True})
    status, body = server.owner.promote(required.id, review["id"], commit)
    assert (status, body) == (
        409,
        {"error": CHECKS_CHANGE_NOT_ACCEPTED, "reasons": [MODULE_CHANGED]},
    )
    # The consent held no acceptance, so approving again (accepting) is allowed.
    status, approved = required.approve(review["id"], commit, True)
    assert status == 200, approved
    status, promoted = server.owner.promote(required.id, review["id"], commit)
    assert status == 200, promoted
    assert (
        server.owner.state(required.id)["ledger"][-1]["acceptedChecksChange"]
        == (approved["approval"]["acceptedChecksChange"])
    )


def test_an_acceptance_never_covers_a_diff_canonical_moved_to_since(server: Server) -> None:
    """A accepts v0 -> v2 of the check; B lands v1 first (A builds on B). A's consent was
    for another diff: its promote is refused until the owner accepts v1 -> v2."""
    project = new_guarded_project(server)
    lane_b = new_lane(project, "agent-b")
    lane_a = new_lane(project, "agent-a")
    c1, review_b = _replace_the_check(lane_b, GUARD + "# v1\n")
    lane_a.tree.git(None, "pull", "-q", str(lane_b.tree.path), "main")
    c2, review_a = _replace_the_check(lane_a, GUARD + "# v2\n")
    status, first = project.approve(review_a["id"], c2, True)
    assert status == 200, first
    assert project.approve(review_b["id"], c1, True)[0] == 200
    assert server.owner.promote(project.id, review_b["id"], c1)[0] == 200

    status, body = server.owner.promote(project.id, review_a["id"], c2)
    assert status == 409
    assert body["error"] == CHECKS_CHANGE_NOT_ACCEPTED
    assert body["reasons"][0].startswith("checks-changed: The accepted checks change differs")
    assert body["reasons"][1:] == [MODULE_CHANGED]
    assert server.owner.state(project.id)["project"]["canonicalHead"] == c1

    status, second = project.approve(review_a["id"], c2, True)
    assert status == 200, second
    [now_accepted] = second["approval"]["acceptedChecksChange"]
    [then_accepted] = first["approval"]["acceptedChecksChange"]
    assert now_accepted["after"] == then_accepted["after"]
    assert now_accepted["before"] != then_accepted["before"]
    status, promoted = server.owner.promote(project.id, review_a["id"], c2)
    assert status == 200, promoted
    assert server.owner.state(project.id)["ledger"][-1]["acceptedChecksChange"] == [now_accepted]
