"""The API's resources in wire form: domain state turned into the response models."""

from __future__ import annotations

from forkhorse.domain.model import (
    Approval,
    Claim,
    Fork,
    LedgerEntry,
    Packet,
    Principal,
    Project,
    Promotion,
    Review,
)
from forkhorse.domain.receipts import format_timestamp
from forkhorse.responses import (
    AgentView,
    ApprovalView,
    ClaimView,
    DonePromotion,
    ForkView,
    LedgerView,
    LogEntryLink,
    PacketState,
    PacketView,
    PendingPromotion,
    ProjectView,
    PromotionLinks,
    ReviewDetail,
    ReviewView,
)


def canonical_url(base_url: str, project_id: str) -> str:
    return f"{base_url}/git/{project_id}/canonical.git"


def fork_url(base_url: str, project_id: str, fork_id: str) -> str:
    return f"{base_url}/git/{project_id}/forks/{fork_id}.git"


def project_view(project: Project, canonical_head: str | None, base_url: str) -> ProjectView:
    return ProjectView(
        id=project.id,
        name=project.name,
        settings=project.effective_settings,
        policy=project.policy,
        canonical_head=canonical_head,
        clone_url=canonical_url(base_url, project.id),
    )


def agent_view(agent: Principal) -> AgentView:
    return AgentView(id=agent.id, name=agent.name)


def fork_view(fork: Fork, head: str | None, base_url: str) -> ForkView:
    return ForkView(
        id=fork.id,
        name=fork.name,
        owner=fork.owner_agent_id,
        head=head,
        clone_url=fork_url(base_url, fork.project_id, fork.id),
    )


def packet_view(packet: Packet) -> PacketView:
    return PacketView(id=packet.id, title=packet.title)


def packet_state(packet: Packet, claim: Claim | None) -> PacketState:
    return PacketState(
        id=packet.id, title=packet.title, claim=None if claim is None else claim_view(claim)
    )


def claim_view(claim: Claim) -> ClaimView:
    return ClaimView(
        id=f"{claim.packet_id}:{claim.agent_id}",
        packet_id=claim.packet_id,
        agent_id=claim.agent_id,
        expires_at=format_timestamp(claim.expires_at),
    )


def approval_view(approval: Approval) -> ApprovalView:
    return ApprovalView(
        commit=approval.commit,
        digest=approval.digest,
        mode="required" if approval.require_receipt else "advisory",
        approved_at=format_timestamp(approval.approved_at),
        accepted_checks_change=list(approval.accepted_checks_change),
    )


def done_promotion(promotion: Promotion, entry: LedgerEntry) -> DonePromotion:
    """A done promotion: what canonical moved from and to, and the digest it rested on."""
    project = f"/projects/{entry.project_id}"
    return DonePromotion(
        id=promotion.id,
        links=PromotionLinks(
            ledger=f"{project}/ledger/{promotion.id}",
            attestation=f"{project}/promotions/{promotion.id}/attestation",
        ),
        commit=entry.commit,
        from_=entry.previous_head,
        to=entry.commit,
        digest=entry.digest,
        mode=promotion.mode or "advisory",
        promoted_at=format_timestamp(entry.promoted_at),
    )


def pending_promotion(promotion: Promotion) -> PendingPromotion:
    """A promotion whose job is still running (queued, pending or writing): on the wire
    it is simply pending."""
    return PendingPromotion(
        id=promotion.id, state="pending", commit=promotion.commit, mode=promotion.mode
    )


def review_view(review: Review, promotion: DonePromotion | None) -> ReviewView:
    execution = review.execution
    return ReviewView(
        id=review.id,
        packet_id=review.packet_id,
        fork_id=review.fork_id,
        commit=review.commit,
        receipt=None if execution is None else execution.summary,
        approval=None if review.approval is None else approval_view(review.approval),
        promotion=promotion,
    )


def review_detail(view: ReviewView, log_index: int | None) -> ReviewDetail:
    """One review with its receipt's log entry, at `log_index` (None: not logged)."""
    return ReviewDetail(**dict(view), log_entry=None if log_index is None else _log_link(log_index))


def _log_link(index: int) -> LogEntryLink:
    return LogEntryLink(index=index, entry=f"/log/entry/{index}", checkpoint="/log/checkpoint")


def ledger_view(entry: LedgerEntry) -> LedgerView:
    return LedgerView(
        promotion_id=entry.promotion_id,
        review_id=entry.review_id,
        commit=entry.commit,
        from_=entry.previous_head,
        digest=entry.digest,
        promoted_at=format_timestamp(entry.promoted_at),
        accepted_checks_change=list(entry.accepted_checks_change),
    )
