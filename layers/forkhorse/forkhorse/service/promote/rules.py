"""What the promote request and the promote workflow's steps share: the exact answers,
the checks both modes apply, settling and reconciliation.

The request side (`service/promote/request.py`) and the steps (`service/promote/steps.py`, run
by Step Functions or by the local supervisor) both use these, so each rule lives once.
"""

from __future__ import annotations

import logging

from forkhorse.domain.checks_change import unaccepted_reasons
from forkhorse.domain.gate import consent_reasons
from forkhorse.domain.model import (
    CheckChange,
    LedgerEntry,
    Project,
    Promotion,
    PromotionMode,
    Refusal,
    Review,
    SettledState,
)
from forkhorse.service.approvals import checks_diff
from forkhorse.service.context import Context
from forkhorse.service.errors import Conflict, ServiceError

log = logging.getLogger(__name__)

CONSENT_MISSING = "Promote needs the owner's approval of this exact commit."
CHECKS_CHANGE_NOT_ACCEPTED = (
    "Promote needs the owner's acceptance of this commit's checks change against canonical."
)
UNCERTAIN = (
    "The promotion's outcome is uncertain; promotes of this project are fenced until "
    "the next promote reconciles it."
)
FENCED = "Another promotion of this project is open; try again when it settles."
LEASE_BUSY = "The project's workflow is busy; try again."
CANONICAL_MOVED = "Canonical moved during promote; nothing was written."
LEASE_LOST = "The project's workflow lease was lost during promote; nothing was written."
PROMOTE_FAILED = "The promotion failed."
ALREADY_RUNNING = "A promote of this review is already running."
NO_PROMOTION = "This review has no promotion."
JOB_STOPPED = "The promote job stopped before it finished; nothing was written. Promote again."
NOT_LANDED = "The promotion's canonical write did not land; nothing was written."
STOPPED = Refusal(kind="conflict", error=JOB_STOPPED)


def refusal_of(error: ServiceError) -> Refusal:
    reasons = None if error.reasons is None else tuple(error.reasons)
    return Refusal(kind=error.kind, error=error.message, reasons=reasons)


def mode_of(project: Project) -> PromotionMode:
    return "required" if project.effective_settings.require_receipt else "advisory"


def preconditions(context: Context, review: Review, commit: str) -> tuple[CheckChange, ...]:
    """What promote checks before any run, in both modes (the console shows them too).
    Returns the accepted checks change this promote relies on (none unless the policy
    applies and canonical's checks differ)."""
    approval = review.approval
    reasons = consent_reasons(approval, commit)
    if reasons or approval is None:
        raise Conflict(CONSENT_MISSING, reasons=reasons)
    if review.commit != commit:
        raise Conflict(f"The review is at commit {review.commit}, not {commit}.")
    context.require_live_claim(review)
    context.require_fork_head(review, commit)
    context.require_fast_forward(review.project_id, commit)
    project = context.store.get_project(review.project_id)
    if project is None or not project.protects_checks:
        return ()
    # Against canonical's head now: under the workflow lease it cannot move before the write.
    diff = checks_diff(context, review.project_id, commit)
    reasons = unaccepted_reasons(diff, approval.accepted_checks_change)
    if reasons:
        raise Conflict(CHECKS_CHANGE_NOT_ACCEPTED, reasons=reasons)
    return diff.protected


def ledger_entry(context: Context, promotion: Promotion) -> LedgerEntry:
    return LedgerEntry(
        project_id=promotion.project_id,
        promotion_id=promotion.id,
        review_id=promotion.review_id,
        commit=promotion.commit,
        previous_head=promotion.previous_head,
        digest=promotion.digest,
        promoted_at=context.clock.now(),
        accepted_checks_change=promotion.accepted_checks_change,
    )


def settle(
    context: Context,
    promotion: Promotion,
    state: SettledState,
    entry: LedgerEntry | None = None,
    refusal: Refusal | None = None,
) -> bool:
    return context.store.settle_promotion(
        promotion.project_id, promotion.id, state, entry, context.clock.now(), refusal
    )


def settle_by_head(context: Context, promotion: Promotion) -> None:
    """A writing or uncertain promotion's compare-and-set landed iff canonical is at its
    commit: settle it done (with its ledger entry) or failed."""
    if context.repos(promotion.project_id).head() == promotion.commit:
        settle(context, promotion, "done", ledger_entry(context, promotion))
    else:
        settle(context, promotion, "failed", refusal=Refusal(kind="conflict", error=NOT_LANDED))


def reconcile(context: Context, project_id: str, keep: str | None = None) -> None:
    """Holding the lease, settle a promotion left open by a dead workflow or an unknown
    write. A pending one never reached the write; for a writing or uncertain one,
    canonical's actual head says whether its compare-and-set landed. `keep` names the
    caller's own promotion, which is resuming, not dead."""
    open_promotion = context.store.open_promotion(project_id)
    if open_promotion is None or open_promotion.id == keep:
        return
    if open_promotion.state == "pending":
        settle(context, open_promotion, "failed", refusal=STOPPED)
    else:
        settle_by_head(context, open_promotion)
    log.warning("reconciled promotion %s of %s", open_promotion.id, project_id)
