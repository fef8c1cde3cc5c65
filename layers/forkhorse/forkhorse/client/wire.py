"""The answers the client reads, as typed models.

PROVISIONAL: these mirror `forkhorse.service.views` until the service's own response models
(`forkhorse.service.responses`, branch i-api) land; then the client imports those instead
and this module goes. The receipt summary and record are the domain's own models already.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forkhorse.domain.receipts import ReceiptRecord, ReceiptSummary


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")


class Settings(_Answer):
    require_receipt: bool = Field(alias="requireReceipt")


class Project(_Answer):
    id: str
    name: str
    settings: Settings
    canonical_head: str | None = Field(alias="canonicalHead")
    clone_url: str = Field(alias="cloneUrl")


class ProjectAnswer(_Answer):
    project: Project


class ProjectList(_Answer):
    projects: list[Project]


class SettingsAnswer(_Answer):
    settings: Settings


class Fork(_Answer):
    id: str
    name: str
    owner: str
    head: str | None
    clone_url: str = Field(alias="cloneUrl")


class ForkAnswer(_Answer):
    fork: Fork


class Claim(_Answer):
    packet_id: str = Field(alias="packetId")
    agent_id: str = Field(alias="agentId")
    expires_at: str = Field(alias="expiresAt")


class ClaimAnswer(_Answer):
    claim: Claim | None


class Packet(_Answer):
    id: str
    title: str
    claim: Claim | None = None


class PacketAnswer(_Answer):
    packet: Packet


class Agent(_Answer):
    id: str
    name: str


class AgentAnswer(_Answer):
    agent: Agent
    token: str = Field(repr=False)


class MemberAnswer(_Answer):
    member: dict[str, Any]


class Review(_Answer):
    id: str
    packet_id: str = Field(alias="packetId")
    fork_id: str = Field(alias="forkId")
    commit: str
    receipt: ReceiptSummary | None
    approval: dict[str, Any] | None = None
    promotion: dict[str, Any] | None = None


class ReviewAnswer(_Answer):
    review: Review


class ProjectState(_Answer):
    project: Project
    forks: list[Fork]
    packets: list[Packet]
    reviews: list[Review]
    ledger: list[dict[str, Any]]


class RecordAnswer(_Answer):
    digest: str
    receipt: ReceiptRecord


class ApprovalAnswer(_Answer):
    approval: dict[str, Any]


class PromotionAnswer(_Answer):
    """200: the done promotion (`from`, `to`, `digest`); 202: `state: "pending"`."""

    promotion: dict[str, Any]


class Verdict(_Answer):
    allowed: bool
    reasons: list[str]


class GateAnswer(_Answer):
    mode: str
    commit: str
    approve: Verdict
    promote: Verdict
    checks: dict[str, Any]


class HistoryAnswer(_Answer):
    source: str
    events: list[dict[str, Any]]


class StoredReviewReceipt(_Answer):
    digest: str
    classification: Any


class ReviewReceiptList(_Answer):
    receipts: list[dict[str, Any]] = Field(default_factory=list)
