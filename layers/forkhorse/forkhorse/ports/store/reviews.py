"""Reviews, their current execution and owner consent, and the Flow-Next review
receipts attached to them."""

from datetime import datetime
from typing import Protocol

from forkhorse.domain.model import Approval, InvalidatedExecution, Review
from forkhorse.domain.receipts import ReceiptSummary, Trigger


class ReviewStore(Protocol):
    def create_review(self, review: Review) -> bool:
        """False if the id exists. The review may already carry its first execution."""
        ...

    def get_review(self, review_id: str) -> Review | None: ...

    def list_reviews(self, project_id: str) -> list[Review]:
        """The project's reviews, oldest first."""
        ...

    def list_active_reviews(self, project_id: str) -> list[Review]:
        """The project's active reviews, oldest first: for each fork and packet, the review
        created last (a newer review of the same packet from the same fork replaces it).
        Read without touching the rest of the project's history."""
        ...

    def list_reviews_page(
        self, project_id: str, before_review_id: str | None, limit: int
    ) -> list[Review] | None:
        """Up to `limit` of the project's reviews, newest first, starting after (older than)
        the review `before_review_id`, or at the newest. None if `before_review_id` names
        no review of the project. Reads at most `limit` reviews."""
        ...

    def start_execution(
        self,
        review_id: str,
        commit: str,
        trigger: Trigger,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        """Replace the current execution; its digest starts cleared. False if no such review."""
        ...

    def retarget_review(
        self,
        review_id: str,
        expected_commit: str,
        commit: str,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        """Move a review from `expected_commit` to `commit` (a followed push): clear the
        owner's consent, which belongs to one commit, and start a `review-created`
        execution. False if the review is unknown or no longer at `expected_commit`."""
        ...

    def update_summary(self, review_id: str, generation: str, summary: ReceiptSummary) -> bool:
        """Publish progress or a digest-less final summary.

        Applies only while `generation` is current and still running. The digest
        can only be set by `attach`.
        """
        ...

    def attach(
        self,
        review_id: str,
        commit: str,
        generation: str,
        trigger: Trigger,
        digest: str,
        summary: ReceiptSummary,
        now: datetime,
    ) -> bool:
        """Attach a published record: one compare-and-set over commit, generation,
        trigger (of the current, still running execution) and the live claim (the
        review's packet claimed by the review's agent, not expired at `now`)."""
        ...

    def discard_execution(self, review_id: str, generation: str) -> bool:
        """Drop the current execution (the review reads `receipt: null`) when its commit
        has no `.forkhorse/checks`. Applies only while `generation` is current and running."""
        ...

    def invalidate_running(self, now: datetime) -> list[InvalidatedExecution]:
        """Restart recovery: every running execution becomes an infrastructure error
        (so its generation can never attach)."""
        ...

    def approve(
        self,
        review_id: str,
        approval: Approval,
        expected_digest: str | None,
        expected_generation: str | None,
        *,
        compare_receipt: bool = True,
    ) -> bool:
        """Store owner consent if the review's commit is `approval.commit` and (unless
        `compare_receipt` is off, as in advisory mode) its current execution still has
        `expected_generation` and `expected_digest`."""
        ...

    # --- Flow-Next review receipts ----------------------------------------------------
    def put_review_receipt(self, review_id: str, digest: str) -> None:
        """Attach a stored Flow-Next receipt record to a review (idempotent)."""
        ...

    def list_review_receipts(self, review_id: str) -> list[str]:
        """Digests attached to the review, sorted (lineage comes from the receipts)."""
        ...
