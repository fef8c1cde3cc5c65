"""Review requests, receipts, followed pushes and Flow-Next review receipts."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from typing import Any

from forkhorse import records
from forkhorse.domain.canonical import RecordCorruptedError, digest_of
from forkhorse.domain.limits import REVIEW_RECEIPTS
from forkhorse.domain.model import Execution, Review
from forkhorse.domain.receipts import Trigger, interrupted_summary, running_summary
from forkhorse.domain.run import RunRef
from forkhorse.domain.snapshot import SnapshotUnavailable
from forkhorse.flow.classify import classify_lineage, classify_receipt
from forkhorse.ports.events import PushDetail
from forkhorse.ports.git import DEFAULT_BRANCH
from forkhorse.responses import (
    ListedReviewReceipt,
    ReceiptBody,
    ReviewBody,
    ReviewReceiptList,
    StoredReviewReceipt,
)
from forkhorse.service.context import Context
from forkhorse.service.errors import BadRequest, Conflict, Forbidden, NotFound
from forkhorse.service.identity import Caller
from forkhorse.service.review_receipts import ReviewReceipts
from forkhorse.service.views import review_detail, review_view

log = logging.getLogger(__name__)

NO_RECEIPT = "No receipt is attached to this review."


def reserve_run(context: Context, review: Review, commit: str, trigger: Trigger) -> RunRef:
    """Make a fresh generation the review's current, running execution (digest cleared),
    without starting it: the promote workflow starts its own before-promote run."""
    run = review.run(str(uuid.uuid4()), trigger, commit)
    summary = running_summary(trigger, context.clock.now())
    with abandoned_on_failure(context, run):
        started = context.store.start_execution(review.id, commit, trigger, run.generation, summary)
    if not started:
        raise Conflict("The review disappeared while starting its checks.")
    return run


@contextlib.contextmanager
def abandoned_on_failure(context: Context, run: RunRef) -> Iterator[None]:
    """Making `run` current, or starting it, failed: the write may have landed all the same
    (its reply was lost), and nothing will ever run it, so end it as interrupted rather than
    leave the review reading `running` for good. The failure goes on."""
    try:
        yield
    except Exception:
        try:
            abandon_run(context, run)
        except Exception:
            log.exception("run %s could not be ended after its start failed", run.generation)
        raise


def abandon_run(context: Context, run: RunRef) -> None:
    """End `run` as interrupted if it is its review's current, still running execution."""
    review = context.store.get_review(run.review_id)
    execution = None if review is None else review.execution
    if execution is None or execution.generation != run.generation or not execution.is_running:
        return
    ended = interrupted_summary(execution.summary, context.clock.now())
    context.store.update_summary(run.review_id, run.generation, ended)


class Reviews:
    def __init__(self, context: Context) -> None:
        self._c = context
        self._receipts = ReviewReceipts(context.store, REVIEW_RECEIPTS)

    def request(
        self,
        caller: Caller,
        project_id: str,
        packet_id: str,
        fork_id: str,
        commit: str,
        follow_pushes: bool,
    ) -> ReviewBody:
        """The authority checks, in order, each with its own error; then a fresh run."""
        project = self._c.member_project(caller, project_id, "request reviews")
        fork = self._c.fork_of(project, fork_id)
        if fork.owner_agent_id != caller.id:
            raise Forbidden("Agents may request reviews only of forks they own.")
        if self._c.store.get_packet(project.id, packet_id) is None:
            raise NotFound("Packet not found.")
        claim = self._c.store.live_claim(packet_id, self._c.clock.now())
        if claim is None or claim.agent_id != caller.id:
            raise Conflict("This agent holds no live claim on the packet; claim it first.")
        head = self._c.repos(project.id).head(fork.id)
        if head != commit:
            raise Conflict(f"The commit is not the fork's current head ({head}).")
        self._require_commit(project.id, commit)
        generation = str(uuid.uuid4())
        now = self._c.clock.now()
        summary = running_summary("review-created", now)
        review = Review(
            id=str(uuid.uuid4()),
            project_id=project.id,
            packet_id=packet_id,
            fork_id=fork.id,
            agent_id=caller.id,
            commit=commit,
            created_at=now,
            follow_pushes=follow_pushes,
            execution=Execution(
                generation=generation, commit=commit, trigger="review-created", summary=summary
            ),
        )
        run = review.run(generation, "review-created", commit)
        with abandoned_on_failure(self._c, run):
            if not self._c.store.create_review(review):
                raise Conflict("That review already exists.")
            self._c.orchestrator.start_run(run)
        return ReviewBody(review=review_detail(review_view(review, None), None))

    def _require_commit(self, project_id: str, sha: str) -> None:
        """A fork head that names a tag, tree or blob cannot be reviewed or promoted."""
        if not self._is_commit(project_id, sha):
            raise Conflict(
                f"The fork's head {sha} is not a commit (a tag or another object); "
                "point the branch at a commit and request the review again."
            )

    def _is_commit(self, project_id: str, sha: str) -> bool:
        try:
            self._c.repos(project_id).read_commit(sha)
        except SnapshotUnavailable:
            return False
        return True

    def receipt(self, caller: Caller, project_id: str, review_id: str) -> ReceiptBody:
        """The attached record with its bounded logs; never accepts receipt input."""
        project = self._c.owned_project(caller, project_id, "read receipt records")
        review = self._c.visible_review(caller, project, review_id)
        digest = None if review.execution is None else review.execution.digest
        if digest is None:
            raise NotFound(NO_RECEIPT)
        try:
            record = records.get_record(self._c.store, digest)
        except records.RecordRefusedError as refused:
            raise Conflict(records.RECORD_REFUSED) from refused
        except RecordCorruptedError as corrupted:
            raise Conflict("The attached record does not match its digest.") from corrupted
        if record is None:
            raise NotFound(NO_RECEIPT)
        return ReceiptBody(digest=digest, receipt=record)

    # --- followed pushes --------------------------------------------------------------
    def on_push(self, push: PushDetail) -> list[str]:
        """A push to a fork moves each review that follows it to the new head; returns
        the moved review ids. Only while the agent's claim on the packet is live."""
        new = push.new
        if push.ref != DEFAULT_BRANCH or new is None:
            return []
        moved = []
        for review in self._c.store.list_reviews(push.project):
            follows = review.fork_id == push.fork and review.follow_pushes
            if follows and review.commit != new and self._follow(review, new):
                moved.append(review.id)
        return moved

    def _follow(self, review: Review, new: str) -> bool:
        if not self._is_commit(review.project_id, new):
            return False  # a branch moved to a tag or another object is never reviewed
        claim = self._c.store.live_claim(review.packet_id, self._c.clock.now())
        if claim is None or claim.agent_id != review.agent_id:
            return False
        generation = str(uuid.uuid4())
        summary = running_summary("review-created", self._c.clock.now())
        if not self._c.store.retarget_review(review.id, review.commit, new, generation, summary):
            return False  # another push moved it first
        self._cancel_superseded(review)
        run = review.run(generation, "review-created", new)
        self._c.orchestrator.start_run(run)
        log.info("review %s follows its fork to %s", review.id, new)
        return True

    def _cancel_superseded(self, review: Review) -> None:
        """The review moved on: its previous run can never attach, so stop spending on it."""
        previous = review.execution
        if previous is None or not previous.is_running:
            return
        self._c.orchestrator.cancel_run(review.run_of(previous))

    # --- Flow-Next review receipts ------------------------------------------------------
    def add_review_receipt(
        self, caller: Caller, project_id: str, review_id: str, body: dict[str, Any]
    ) -> StoredReviewReceipt:
        project = self._c.member_project(caller, project_id, "attach review receipts")
        review = self._c.visible_review(caller, project, review_id)
        if review.agent_id != caller.id:
            raise Forbidden("Only the agent that requested the review may attach receipts.")
        encoded = self._receipts.canonical(body)
        digest = digest_of(encoded)
        with self._receipts.attaching(review.id):
            lineage = self._receipts.lineage(review.id)
            if digest not in lineage.digests:  # attaching the same receipt again is free
                self._receipts.check_room(lineage, len(encoded))
            classification = classify_receipt(body, review.commit, lineage.values)
            if not classification["valid"]:
                raise BadRequest(
                    f"The review receipt is invalid: {classification['message']}",
                    reasons=[f"{classification['rule']} at {classification['pointer'] or '/'}"],
                )
            self._receipts.check_generation(lineage, digest, body)
            records.put_json(self._c.store, body, self._c.clock.now())
            self._c.store.put_review_receipt(review.id, digest)
            self._receipts.remember(digest, body, len(encoded))
        return StoredReviewReceipt(digest=digest, classification=classification)

    def list_review_receipts(
        self, caller: Caller, project_id: str, review_id: str
    ) -> ReviewReceiptList:
        project = self._c.visible_project(caller, project_id, "read review receipts")
        review = self._c.visible_review(caller, project, review_id)
        lineage = self._receipts.lineage(review.id)
        classifications = classify_lineage(lineage.values, review.commit)
        return ReviewReceiptList(
            receipts=[
                ListedReviewReceipt(
                    digest=stored.digest, receipt=stored.value, classification=classified
                )
                for stored, classified in zip(lineage.readable, classifications, strict=True)
            ],
            # Flagged, never a failed listing.
            unreadable=list(lineage.unreadable) or None,
        )
