"""Wire shapes of the API's resources: camelCase JSON, exactly the documented fields."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from forkhorse.domain.model import (
    Approval,
    CheckChange,
    Claim,
    Fork,
    LedgerEntry,
    Packet,
    Principal,
    Project,
    Promotion,
    Review,
)
from forkhorse.domain.receipts import format_timestamp, summary_json

Json = dict[str, Any]


def canonical_url(base_url: str, project_id: str) -> str:
    return f"{base_url}/git/{project_id}/canonical.git"


def fork_url(base_url: str, project_id: str, fork_id: str) -> str:
    return f"{base_url}/git/{project_id}/forks/{fork_id}.git"


def project_json(project: Project, canonical_head: str | None, base_url: str) -> Json:
    return {
        "id": project.id,
        "name": project.name,
        "settings": project.effective_settings.model_dump(mode="json"),
        "policy": project.policy.model_dump(mode="json"),
        "canonicalHead": canonical_head,
        "cloneUrl": canonical_url(base_url, project.id),
    }


def agent_json(agent: Principal) -> Json:
    return {"id": agent.id, "name": agent.name}


def fork_json(fork: Fork, head: str | None, base_url: str) -> Json:
    return {
        "id": fork.id,
        "name": fork.name,
        "owner": fork.owner_agent_id,
        "head": head,
        "cloneUrl": fork_url(base_url, fork.project_id, fork.id),
    }


def packet_json(packet: Packet) -> Json:
    return {"id": packet.id, "title": packet.title}


def claim_json(claim: Claim) -> Json:
    return {
        "id": f"{claim.packet_id}:{claim.agent_id}",
        "packetId": claim.packet_id,
        "agentId": claim.agent_id,
        "expiresAt": format_timestamp(claim.expires_at),
    }


def approval_json(approval: Approval) -> Json:
    return {
        "commit": approval.commit,
        "digest": approval.digest,
        "mode": "required" if approval.require_receipt else "advisory",
        "approvedAt": format_timestamp(approval.approved_at),
        "acceptedChecksChange": checks_change_json(approval.accepted_checks_change),
    }


def checks_change_json(changes: Iterable[CheckChange]) -> list[Json]:
    return [change.model_dump(mode="json") for change in changes]


def promotion_json(promotion: Promotion, entry: LedgerEntry) -> Json:
    """A done promotion: what canonical moved from and to, and the digest it rested on."""
    return {
        "commit": entry.commit,
        "from": entry.previous_head,
        "to": entry.commit,
        "digest": entry.digest,
        "mode": promotion.mode or "advisory",
        "promotedAt": format_timestamp(entry.promoted_at),
    }


def pending_promotion_json(promotion: Promotion) -> Json:
    """A promotion whose job is still running (queued, pending or writing): on the wire
    it is simply pending."""
    return {
        "id": promotion.id,
        "state": "pending",
        "commit": promotion.commit,
        "mode": promotion.mode,
    }


def review_json(review: Review, promotion: Json | None) -> Json:
    execution = review.execution
    return {
        "id": review.id,
        "packetId": review.packet_id,
        "forkId": review.fork_id,
        "commit": review.commit,
        "receipt": None if execution is None else summary_json(execution.summary),
        "approval": None if review.approval is None else approval_json(review.approval),
        "promotion": promotion,
    }


def ledger_json(entry: LedgerEntry) -> Json:
    return {
        "promotionId": entry.promotion_id,
        "reviewId": entry.review_id,
        "commit": entry.commit,
        "from": entry.previous_head,
        "digest": entry.digest,
        "promotedAt": format_timestamp(entry.promoted_at),
        "acceptedChecksChange": checks_change_json(entry.accepted_checks_change),
    }


def done_promotions(
    promotions: Iterable[Promotion], ledger: Iterable[LedgerEntry]
) -> dict[str, Json]:
    """Each review's latest done promotion, in wire form."""
    by_id = {promotion.id: promotion for promotion in promotions}
    latest: dict[str, Json] = {}
    for entry in ledger:
        promotion = by_id.get(entry.promotion_id)
        if promotion is not None:
            latest[entry.review_id] = promotion_json(promotion, entry)
    return latest
