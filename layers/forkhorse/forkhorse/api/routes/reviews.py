"""Reviews: requests, receipts, approval, promotion, the console's views of the gate and
the run's history, and Flow-Next review receipts."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from forkhorse.api import links
from forkhorse.api.guards import caller_of
from forkhorse.api.models import ApproveBody, CommitBody, RequestReview
from forkhorse.api.routes.answers import ERRORS, answers, ok, promote_status
from forkhorse.api.routes.operations import PROJECTS, PROMOTIONS, REVIEWS, operation
from forkhorse.domain.limits import PAGE
from forkhorse.responses import (
    ApprovalBody,
    GateView,
    HistoryView,
    LedgerEntryBody,
    LedgerPage,
    Promoted,
    PromotionPending,
    ReceiptBody,
    ReviewBody,
    ReviewPage,
    ReviewReceiptList,
    StoredReviewReceipt,
)
from forkhorse.service.facade import Service
from forkhorse.service.promote.request import PromoteAnswer

REVIEW = "/projects/<project_id>/reviews/<review_id>"
RECEIPTS = f"{REVIEW}/review-receipts"
PROMOTION_ANSWERS = {
    200: ok("Promoted.", links.done_promotion(), Promoted),
    202: ok("Still running.", links.promoted(), PromotionPending),
    **ERRORS,
}


class ReviewRoutes:
    def __init__(self, service: Service) -> None:
        self._service = service
        self.router = Router()  # type: ignore[no-untyped-call]
        post, get = self.router.post, self.router.get
        post(
            "/projects/<project_id>/reviews",
            responses=answers(202, ok("Review.", links.requested_review())),
            **operation("requestReview", "Request a review of a pushed commit (agent).", REVIEWS),
        )(self.request_review)
        get(
            "/projects/<project_id>/reviews",
            description=(
                "All the project's reviews, newest first, a page at a time (`/state` shows"
                " only the active ones). Pass a page's `next` as `cursor` for the next page."
            ),
            responses=answers(200, ok("One page of reviews.", links.review_page())),
            **operation("listReviews", "List the project's reviews, a page at a time.", REVIEWS),
        )(self.list_reviews)
        get(
            "/projects/<project_id>/ledger",
            description=(
                "The project's whole ledger, newest first, a page at a time (`/state` shows"
                " the newest entries). Pass a page's `next`, or `/state`'s `ledgerNext`, as"
                " `cursor` for the next page."
            ),
            responses=answers(200, ok("One page of the ledger.", links.ledger_page())),
            **operation("listLedger", "List the project's ledger, a page at a time.", PROJECTS),
        )(self.list_ledger)
        get(
            "/projects/<project_id>/ledger/<promotion_id>",
            description="One ledger entry, by its promotion's id (a promotion's `links.ledger`).",
            responses=answers(200, ok("The ledger entry.")),
            **operation("getLedgerEntry", "One ledger entry.", PROJECTS),
        )(self.ledger_entry)
        get(
            REVIEW,
            description=(
                "One review, as `/state` and the pages show it, and where the transparency"
                " log holds its attached receipt (`logEntry`, read for this review alone)."
            ),
            responses=answers(200, ok("The review.", links.requested_review())),
            **operation("getReview", "One review.", REVIEWS),
        )(self.review)
        get(
            f"{REVIEW}/receipt",
            responses=answers(200, ok("The record.")),
            **operation(
                "getReceipt", "The review's receipt: its checks and their results.", REVIEWS
            ),
        )(self.receipt)
        post(
            f"{REVIEW}/approve",
            responses=answers(200, ok("Consent.", links.approved())),
            **operation("approveReview", "Approve the reviewed commit (owner).", REVIEWS),
        )(self.approve)
        post(
            f"{REVIEW}/promote",
            responses=PROMOTION_ANSWERS,
            **operation("promoteReview", "Promote the approved commit to canonical.", PROMOTIONS),
        )(self.promote)
        get(
            f"{REVIEW}/promotion",
            responses=PROMOTION_ANSWERS,
            **operation(
                "getPromotion", "The review's promotion, done or still running.", PROMOTIONS
            ),
        )(self.promotion)
        get(
            f"{REVIEW}/gate",
            responses=answers(200, ok("The gate, now.")),
            **operation("getGate", "What the gate would decide now.", REVIEWS),
        )(self.gate)
        get(
            f"{REVIEW}/history",
            responses=answers(200, ok("The run's events.")),
            **operation("getHistory", "The review run's events.", REVIEWS),
        )(self.history)
        post(
            RECEIPTS,
            responses=answers(201, ok("Stored.")),
            **operation("addReviewReceipt", "Attach a Flow-Next review receipt.", REVIEWS),
        )(self.add_review_receipt)
        get(
            RECEIPTS,
            responses=answers(200, ok("Review receipts.")),
            **operation("listReviewReceipts", "The review's Flow-Next review receipts.", REVIEWS),
        )(self.list_review_receipts)

    def request_review(self, project_id: str, body: RequestReview) -> tuple[ReviewBody, int]:
        review = self._service.reviews.request(
            caller_of(self.router),
            project_id,
            body.packet_id,
            body.fork_id,
            body.commit,
            body.follow_pushes,
        )
        return review, 202

    def list_reviews(
        self,
        project_id: str,
        cursor: Annotated[str | None, Query(description="A page's `next`.")] = None,
        limit: Annotated[int | None, Query(description=f"1 to {PAGE.max_size}.")] = None,
    ) -> ReviewPage:
        return self._service.listings.page(caller_of(self.router), project_id, cursor, limit)

    def list_ledger(
        self,
        project_id: str,
        cursor: Annotated[str | None, Query(description="A page's `next`.")] = None,
        limit: Annotated[int | None, Query(description=f"1 to {PAGE.max_size}.")] = None,
    ) -> LedgerPage:
        return self._service.listings.ledger(caller_of(self.router), project_id, cursor, limit)

    def ledger_entry(self, project_id: str, promotion_id: str) -> LedgerEntryBody:
        caller = caller_of(self.router)
        return self._service.listings.ledger_entry(caller, project_id, promotion_id)

    def review(self, project_id: str, review_id: str) -> ReviewBody:
        return self._service.listings.review(caller_of(self.router), project_id, review_id)

    def receipt(self, project_id: str, review_id: str) -> ReceiptBody:
        return self._service.reviews.receipt(caller_of(self.router), project_id, review_id)

    def approve(self, project_id: str, review_id: str, body: ApproveBody) -> ApprovalBody:
        return self._service.approvals.approve(
            caller_of(self.router), project_id, review_id, body.commit, body.accept_checks_change
        )

    def promote(
        self, project_id: str, review_id: str, body: CommitBody
    ) -> tuple[Promoted | PromotionPending, int]:
        """Waits a short time for the promote job; 202 while it still runs."""
        caller = caller_of(self.router)
        answer = self._service.promotions.promote(caller, project_id, review_id, body.commit)
        return _with_status(answer)

    def promotion(self, project_id: str, review_id: str) -> tuple[Promoted | PromotionPending, int]:
        caller = caller_of(self.router)
        return _with_status(self._service.promotions.status(caller, project_id, review_id))

    def gate(self, project_id: str, review_id: str) -> GateView:
        return self._service.inspection.gate(caller_of(self.router), project_id, review_id)

    def history(self, project_id: str, review_id: str) -> HistoryView:
        return self._service.inspection.history(caller_of(self.router), project_id, review_id)

    def add_review_receipt(
        self, project_id: str, review_id: str, body: dict[str, Any]
    ) -> tuple[StoredReviewReceipt, int]:
        caller = caller_of(self.router)
        stored = self._service.reviews.add_review_receipt(caller, project_id, review_id, body)
        return stored, 201

    def list_review_receipts(self, project_id: str, review_id: str) -> ReviewReceiptList:
        caller = caller_of(self.router)
        return self._service.reviews.list_review_receipts(caller, project_id, review_id)


def _with_status(answer: PromoteAnswer) -> tuple[Promoted | PromotionPending, int]:
    """The promotion and its status; a refusal raises."""
    return answer.accepted(), promote_status(answer)
