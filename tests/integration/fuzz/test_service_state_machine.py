"""Hypothesis drives random sequences of what agents and owners do against a live server:
pushes (real git over smart HTTP), review requests, claims and releases, approvals (of the
right commit or a wrong one), promotes, settings flips and restarts over the same home.
After every step the invariants are checked against `/state`, the receipt route and the
stored records. Checks are quick-only (bubblewrap), so no container starts.

On a failure Hypothesis prints the steps (`state.push(kind='passing')`, ...) without
shrinking; every example starts from a fresh project on the module's server, so that
listing replays it (receipt timing aside).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from forkhorse.domain.canonical import canonical_bytes, digest_of
from forkhorse.records import get_record
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from tests.integration.api.support import QUICK_OK, Client
from tests.support.live import Lane, Server, new_lane, new_project

QUICK_FAILS = "def check(ctx):\n    return {'ok': False, 'message': 'Quick check failed.'}\n"
CHECKS = '[{"name":"quick","tier":"quick","module":".forkhorse/quick/check.py"}]\n'
UNKNOWN_COMMIT = "f" * 40
# Agents mostly hold their claim, owners mostly name the right commit and require receipts,
# so sequences reach gated approve and promote; the other branch still comes up.
MOSTLY_TRUE = st.sampled_from([True, True, True, False])
MOSTLY_FALSE = st.sampled_from([False, False, False, True])
PUSHES = st.sampled_from(["passing", "passing", "failing", "diverging"])
# Refusals a random step may meet; anything else (a 5xx above all) fails the run.
REFUSALS = frozenset({400, 403, 404, 409})
FUZZ_SETTINGS = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    database=None,
    # No shrinking: each step is real I/O, and the generated listing already reproduces.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
    report_multiple_bugs=False,
)


@dataclass(frozen=True)
class ReviewRef:
    id: str
    commit: str

    def __repr__(self) -> str:
        return f"ReviewRef({self.id[:8]}, {self.commit[:8]})"


def _answer(status: int, body: Any, allowed: frozenset[int], what: str) -> None:
    assert status < 500, f"{what}: {status} {body}"
    assert status in allowed, f"{what}: {status} {body}"


@dataclass
class Reached:
    """How far the run got, so a run that never approves or promotes cannot pass unseen."""

    approvals: int = 0
    promotes: dict[str, int] = field(default_factory=lambda: {"required": 0, "advisory": 0})


class ServiceMachine(RuleBasedStateMachine):
    server: ClassVar[Server]
    reached: ClassVar[Reached]
    reviews = Bundle("reviews")
    approved = Bundle("approved")  # reviews whose approve answered 200

    def __init__(self) -> None:
        super().__init__()
        self.parents: dict[str, str | None] = {}
        self.consents: set[tuple[str, str]] = set()
        self.promoted: list[tuple[str, str]] = []  # (review, commit), as promotes answered 200
        self.required = True
        self.steps = 0

    # --- setup ---------------------------------------------------------------------------
    @initialize(required=MOSTLY_TRUE)
    def start(self, required: bool) -> None:
        project = new_project(self.server, required)
        self.required = required
        self.lane: Lane = new_lane(project)
        self.project = project.id
        self.initial = project.initial
        self.parents[project.initial] = None
        self.head = project.initial

    @property
    def owner(self) -> Client:
        return self.server.owner

    @property
    def agent(self) -> Client:
        return self.lane.agent

    def _path(self, review: ReviewRef, leaf: str) -> str:
        return f"/projects/{self.project}/reviews/{review.id}/{leaf}"

    def _files(self, passing: bool) -> dict[str, str]:
        self.steps += 1
        return {
            ".forkhorse/checks": CHECKS,
            ".forkhorse/quick/check.py": QUICK_OK if passing else QUICK_FAILS,
            "notes.txt": f"step {self.steps}\n",
        }

    # --- agent ---------------------------------------------------------------------------
    @rule(kind=PUSHES)
    def push(self, kind: str) -> None:
        """A commit on the fork's head, or (`diverging`) a force push of a commit on the
        initial import, which canonical may not follow once it has moved."""
        parent = self.initial if kind == "diverging" else self.head
        if kind == "diverging":
            self.lane.tree.git(None, "reset", "-q", "--hard", parent)
        commit = self.lane.tree.commit(self._files(kind != "failing"), kind)
        assert self.agent.token is not None
        self.lane.tree.push(self.lane.fork["cloneUrl"], self.agent.token, force=True)
        self.parents[commit], self.head = parent, commit

    @rule(target=reviews, kind=PUSHES, follow=st.booleans())
    def submit(self, kind: str, follow: bool) -> Any:
        """What an agent mostly does: push a commit and ask for its review."""
        self.push(kind)
        return self.request_review(follow)

    @rule(target=reviews, follow=st.booleans())
    def request_review(self, follow: bool) -> Any:
        """A review of the fork's head, whenever it was pushed."""
        body = {
            "packetId": self.lane.packet,
            "forkId": self.lane.fork["id"],
            "commit": self.head,
            "followPushes": follow,
        }
        status, answer = self.agent.call("POST", f"/projects/{self.project}/reviews", body)
        _answer(status, answer, REFUSALS | {202}, "request review")
        if status != 202:
            return multiple()
        assert answer["review"]["commit"] == self.head
        return ReviewRef(answer["review"]["id"], self.head)

    @rule(hold=MOSTLY_TRUE)
    def claim_or_release(self, hold: bool) -> None:
        path = f"/projects/{self.project}/packets/{self.lane.packet}/claim"
        status, body = self.agent.call("POST" if hold else "DELETE", path)
        _answer(status, body, REFUSALS | {201 if hold else 200}, "claim" if hold else "release")

    # --- owner ---------------------------------------------------------------------------
    def _commit_for(self, review: ReviewRef, wrong: bool) -> str:
        """The review's current commit (a review that follows pushes moves), or another."""
        current = str(self.owner.review(self.project, review.id)["commit"])
        if not wrong:
            return current
        if self.head != current:
            return self.head  # the fork's head: the wrong commit most likely to slip through
        others = sorted(commit for commit in self.parents if commit != current)
        return others[-1] if others else UNKNOWN_COMMIT

    @rule(target=approved, review=reviews, wrong=MOSTLY_FALSE)
    def approve(self, review: ReviewRef, wrong: bool) -> Any:
        self.owner.wait_receipt(self.project, review.id)  # an owner reads the receipt first
        commit = self._commit_for(review, wrong)
        status, body = self.owner.call("POST", self._path(review, "approve"), {"commit": commit})
        _answer(status, body, REFUSALS | {200}, "approve")
        if status != 200:
            return multiple()
        assert not wrong, "consent stored for a commit the review is not at"
        approval = body["approval"]
        assert approval["commit"] == commit
        assert approval["mode"] == ("required" if self.required else "advisory")
        if self.required:
            self._assert_passing_record(approval["digest"], review.id, commit)
        self.consents.add((review.id, commit))
        self.reached.approvals += 1
        return ReviewRef(review.id, commit)

    @rule(review=approved, wrong=MOSTLY_FALSE)
    def promote(self, review: ReviewRef, wrong: bool) -> None:
        """Promote an approved review (its approved commit, or another one)."""
        self._promote(review, review.commit if not wrong else self._commit_for(review, True))

    @rule(review=reviews)
    def ship(self, review: ReviewRef) -> None:
        """What an owner mostly does: approve what the review shows, then promote it."""
        approved = self.approve(review, wrong=False)
        if isinstance(approved, ReviewRef):
            self._promote(approved, approved.commit)

    @rule(review=reviews)
    def promote_unapproved(self, review: ReviewRef) -> None:
        """Promote whatever a review is at now, approved or not."""
        self._promote(review, self._commit_for(review, False))

    def _promote(self, review: ReviewRef, commit: str) -> None:
        status, body = self.owner.promote(self.project, review.id, commit)
        _answer(status, body, REFUSALS | {200}, "promote")
        if status != 200:
            return
        assert (review.id, commit) in self.consents, "promoted without consent for the commit"
        promotion = body["promotion"]
        assert promotion["commit"] == promotion["to"] == commit
        assert promotion["mode"] == ("required" if self.required else "advisory")
        if self.required:
            record = self._assert_passing_record(promotion["digest"], review.id, commit)
            assert record.trigger == "before-promote"
        self.promoted.append((review.id, commit))
        self.reached.promotes[promotion["mode"]] += 1

    @rule(required=MOSTLY_TRUE)
    def set_settings(self, required: bool) -> None:
        path = f"/projects/{self.project}/settings"
        body = self.owner.ok("PATCH", path, {"requireReceipt": required})
        assert body == {"settings": {"requireReceipt": required}}
        self.required = required

    @rule(target=reviews, interrupt=st.booleans())
    def restart(self, interrupt: bool) -> Any:
        """Restart the server; with `interrupt`, right after requesting a review of a new
        commit, so its run is cut short."""
        if not interrupt:
            self.server.restart()
            return multiple()
        review = self.submit(kind="passing", follow=False)
        self.server.restart()
        if not isinstance(review, ReviewRef):
            return multiple()
        receipt = self.owner.review(self.project, review.id)["receipt"]
        assert receipt is not None, review
        assert receipt["status"] != "running", receipt
        if receipt["status"] == "infrastructure-error":
            assert receipt["digest"] is None, receipt
        return review

    # --- invariants ----------------------------------------------------------------------
    def _assert_passing_record(self, digest: str | None, review_id: str, commit: str) -> Any:
        assert digest is not None, "required-mode consent or promote without a digest"
        record = get_record(self.server.app.runtime.store, digest)
        assert record is not None, f"no stored record for {digest}"
        assert (record.review_id, record.commit, record.status) == (review_id, commit, "passed")
        assert record.evidence == "dynamic-worker"
        assert record.platform != "mock"
        return record

    def _is_ancestor(self, older: str, newer: str) -> bool:
        at: str | None = newer
        while at is not None:
            if at == older:
                return True
            at = self.parents[at]
        return False

    @invariant()
    def canonical_moves_only_by_fast_forward_through_the_ledger(self) -> None:
        state = self.owner.state(self.project)
        ledger = state["ledger"]
        assert [(entry["reviewId"], entry["commit"]) for entry in ledger] == self.promoted
        head = self.initial
        for entry in ledger:
            assert entry["from"] == head, f"ledger entry does not start at canonical: {entry}"
            assert self._is_ancestor(head, entry["commit"]), f"not a fast-forward: {entry}"
            head = entry["commit"]
        assert state["project"]["canonicalHead"] == head
        assert state["project"]["settings"] == {"requireReceipt": self.required}

    @invariant()
    def consent_and_digests_name_the_reviews_commit(self) -> None:
        store = self.server.app.runtime.store
        for review in self.owner.state(self.project)["reviews"]:
            approval, receipt = review["approval"], review["receipt"]
            if approval is not None:
                assert approval["commit"] == review["commit"], (
                    f"consent for another commit: {review}"
                )
            digest = None if receipt is None else receipt["digest"]
            if digest is not None:
                record = get_record(store, digest)  # verifies the bytes hash to the digest
                assert record is not None, f"attached digest with no record: {review}"
                assert (record.review_id, record.commit) == (review["id"], review["commit"])
            self._assert_receipt_route(review)

    def _assert_receipt_route(self, review: dict[str, Any]) -> None:
        status, body = self.owner.call(
            "GET", f"/projects/{self.project}/reviews/{review['id']}/receipt"
        )
        _answer(status, body, frozenset({200, 404}), "read receipt")
        if status == 200:
            assert digest_of(canonical_bytes(body["receipt"])) == body["digest"]
            assert body["receipt"]["reviewId"] == review["id"]


def test_random_service_sequences_keep_the_invariants(server: Server) -> None:
    ServiceMachine.server, ServiceMachine.reached = server, Reached()
    run_state_machine_as_test(ServiceMachine, settings=FUZZ_SETTINGS)
    reached = ServiceMachine.reached
    print(f"reached: {reached}")
    assert reached.approvals > 0, reached
    assert reached.promotes["required"] > 0, reached
