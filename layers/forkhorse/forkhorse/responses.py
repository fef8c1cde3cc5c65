"""The API's response bodies: what every route answers, as strict camelCase models.

The service's use cases return these, the routes declare them, so `/openapi.json` describes
every body, and a client can parse answers into them. Domain models that already are the
wire shape (settings, policy, checks changes, the receipt summary and record, a review
receipt's classification) are reused, never redefined. Field order is the wire's key order.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forkhorse.domain.model import (
    CheckChange,
    ChecksChangeKind,
    ProjectPolicy,
    ProjectSettings,
    PromotionState,
)
from forkhorse.domain.receipts import ReceiptRecord, ReceiptSummary
from forkhorse.domain.wire import WIRE_CONFIG, is_none
from forkhorse.flow.classify import Classification

Mode = Literal["required", "advisory"]
# `from` is a Python keyword: the field is `from_`, `from` on the wire.
FROM = Field(alias="from")


class _Response(BaseModel):
    model_config = WIRE_CONFIG


class _AsWritten(BaseModel):
    """Bodies holding a review receipt's classification, whose keys are the Flow-Next
    contract's as written (`pre_existing` stays snake_case): no alias generator reaches it."""

    model_config = ConfigDict(**{**WIRE_CONFIG, "alias_generator": None})


class ErrorBody(_Response):
    """Every refusal: one sentence; `reasons` only when a gate lists each one."""

    error: str
    reasons: list[str] | None = Field(default=None, exclude_if=is_none)


# The one refusal the client tells apart by its sentence: its command exits 1, not 3.
CHECKS_FAILED_BEFORE_PROMOTE = "Checks failed before promote."


# --- projects, agents, members -------------------------------------------------------------
class ProjectView(_Response):
    id: str
    name: str
    settings: ProjectSettings
    policy: ProjectPolicy
    canonical_head: str | None
    clone_url: str


class ProjectBody(_Response):
    project: ProjectView


class ProjectList(_Response):
    projects: list[ProjectView]


class SettingsBody(_Response):
    settings: ProjectSettings


class PolicyBody(_Response):
    policy: ProjectPolicy


class AgentView(_Response):
    id: str
    name: str


class CreatedAgent(_Response):
    """The agent and its bearer token, shown this once (only its hash is kept)."""

    agent: AgentView
    token: str


class RevokedAgentView(AgentView):
    revoked: Literal[True]


class RevokedAgent(_Response):
    agent: RevokedAgentView


class MemberView(_Response):
    agent_id: str


class MemberBody(_Response):
    member: MemberView


# --- forks, packets, claims ----------------------------------------------------------------
class ForkView(_Response):
    id: str
    name: str
    owner: str
    head: str | None
    clone_url: str


class ForkBody(_Response):
    fork: ForkView


class PacketView(_Response):
    id: str
    title: str


class PacketBody(_Response):
    packet: PacketView


class ClaimView(_Response):
    id: str
    packet_id: str
    agent_id: str
    expires_at: str


class ClaimBody(_Response):
    claim: ClaimView


class ReleasedClaim(_Response):
    """A released claim: `{"claim": null}`."""

    claim: None


class PacketState(PacketView):
    """A packet in the project's state, with its live claim if any."""

    claim: ClaimView | None


# --- reviews, approvals, promotions --------------------------------------------------------
class ApprovalView(_Response):
    commit: str
    digest: str | None
    mode: Mode
    approved_at: str
    accepted_checks_change: list[CheckChange]


class ApprovalBody(_Response):
    approval: ApprovalView


class PromotionLinks(_Response):
    """Where a done promotion's evidence is, as paths on the service."""

    ledger: str = Field(description="Its ledger entry: `GET /projects/{id}/ledger/{pid}`.")
    attestation: str = Field(
        description="Its signed VSA: `GET /projects/{id}/promotions/{pid}/attestation`."
    )


class DonePromotion(_Response):
    """A done promotion: what canonical moved from and to, and the digest it rested on;
    `id` names it in the ledger and its attestation, which `links` point to."""

    id: str
    links: PromotionLinks
    commit: str
    from_: str | None = FROM
    to: str
    digest: str | None
    mode: Mode
    promoted_at: str


class PendingPromotion(_Response):
    """A promotion whose job still runs (queued, pending or writing): on the wire, pending."""

    id: str
    state: Literal["pending"]
    commit: str
    mode: Mode | None


class Promoted(_Response):
    promotion: DonePromotion


class PromotionPending(_Response):
    promotion: PendingPromotion


class ReviewView(_Response):
    id: str
    packet_id: str
    fork_id: str
    commit: str
    receipt: ReceiptSummary | None
    approval: ApprovalView | None
    promotion: DonePromotion | None


class LogEntryLink(_Response):
    """Where the transparency log holds the review's attached receipt."""

    index: int = Field(description="The entry's index in the log.")
    entry: str = Field(
        description=(
            "The entry, its leaf hash and its bundle's tile path: `GET /log/entry/{index}`"
            " (404 until a signed checkpoint includes it)."
        )
    )
    checkpoint: str = Field(description="The newest signed checkpoint: `GET /log/checkpoint`.")


class ReviewDetail(ReviewView):
    """One review as `/state` shows it, with its attached receipt's log entry (read for
    one review at a time, so the lists leave it out)."""

    log_entry: LogEntryLink | None = Field(
        description="The attached receipt's log entry; null while none is logged."
    )


class ReviewBody(_Response):
    review: ReviewDetail


class ReviewPage(_Response):
    """One page of a project's reviews, newest first. `next` is the cursor of the following
    page (pass it as `?cursor=`), or null on the last page."""

    reviews: list[ReviewView]
    next: str | None


class PacketPage(_Response):
    """One page of a project's packets, each with its live claim (`claim` null: free to
    claim), in id order. `next` is the cursor of the following page, or null on the last."""

    packets: list[PacketState]
    next: str | None


class LedgerView(_Response):
    promotion_id: str
    review_id: str
    commit: str
    from_: str | None = FROM
    digest: str | None
    promoted_at: str
    accepted_checks_change: list[CheckChange]


class LedgerEntryBody(_Response):
    entry: LedgerView


class LedgerPage(_Response):
    """One page of a project's ledger, newest first. `next` is the cursor of the following
    page (pass it as `?cursor=`), or null on the last page."""

    ledger: list[LedgerView]
    next: str | None


class ProjectState(_Response):
    """The project as the caller may see it. `reviews` holds the active reviews (each fork
    and packet's newest); `GET /projects/{id}/reviews` pages through all of them. `ledger`
    holds the newest entries, oldest first; `ledgerNext`, when not null, is the cursor of
    the older ones at `GET /projects/{id}/ledger`."""

    project: ProjectView
    forks: list[ForkView]
    packets: list[PacketState]
    reviews: list[ReviewView]
    ledger: list[LedgerView]
    ledger_next: str | None = None  # absent from servers before the ledger was paged


class ReceiptBody(_Response):
    """The attached record, with its digest."""

    digest: str
    receipt: ReceiptRecord


# --- the console's views -------------------------------------------------------------------
class Verdict(_Response):
    """Allowed, or each reason the call would be refused with."""

    allowed: bool
    reasons: list[str]


class DeclaredCheckView(_Response):
    definition: dict[str, Any]
    module_digest: str | None


class CheckDiffRow(_Response):
    check: str
    change: ChecksChangeKind
    protected: bool
    before: DeclaredCheckView | None
    after: DeclaredCheckView | None


class GateChecks(_Response):
    policy: ProjectPolicy
    enforced: bool
    canonical_head: str | None
    diff: list[CheckDiffRow]


class GateView(_Response):
    """Would approve and promote of the review's current commit be refused, and why."""

    mode: Mode
    commit: str
    approve: Verdict
    promote: Verdict
    checks: GateChecks


class PromoteHistory(_Response):
    promotion_id: str
    state: PromotionState
    execution_arn: str | None
    console_url: str | None
    events: list[dict[str, Any]]


class HistoryView(_Response):
    """The current execution's events, shaped like Step Functions' GetExecutionHistory."""

    source: Literal["step-functions", "local"]
    execution_arn: str | None
    console_url: str | None
    events: list[dict[str, Any]]
    promote: PromoteHistory | None


# --- Flow-Next review receipts -------------------------------------------------------------
class StoredReviewReceipt(_AsWritten):
    digest: str
    classification: Classification


class ListedReviewReceipt(_AsWritten):
    digest: str
    receipt: Any = Field(description="The receipt as attached: open JSON.")
    classification: Classification


class ReviewReceiptList(_AsWritten):
    receipts: list[ListedReviewReceipt]
    # Digests whose records could not be read: flagged, never a failed listing.
    unreadable: list[str] | None = Field(default=None, exclude_if=is_none)


# --- attestations --------------------------------------------------------------------------
class EnvelopeSignature(_AsWritten):
    keyid: str
    sig: str


class DsseEnvelope(_Response):
    """A DSSE envelope (payloadType application/vnd.in-toto+json) holding a signed statement."""

    payload: str
    payload_type: str
    signatures: list[EnvelopeSignature]


class PublicKey(_AsWritten):
    keyid: str
    keytype: str
    scheme: str
    keyval: dict[str, str]
    since: str
    current: bool = Field(description="The key signing now; older keys stay for verifying.")


class KeyList(_Response):
    keys: list[PublicKey]
