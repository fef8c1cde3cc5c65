"""The Store port: all durable state except git objects.

Two adapters implement it (SQLite locally, DynamoDB on AWS) and pass one
conformance suite (`tests/integration/store/`). Every method that changes state
is atomic; methods returning `bool` report whether their condition held (False
changes nothing). Times are timezone-aware and always passed in by the caller,
so expiry is decided by the caller's clock, never the database's.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from forkhorse.domain.model import (
    Approval,
    Claim,
    Fork,
    InvalidatedExecution,
    LedgerEntry,
    Packet,
    Principal,
    Project,
    ProjectPolicy,
    ProjectSettings,
    Promotion,
    Refusal,
    Review,
    SettledState,
)
from forkhorse.domain.receipts import ReceiptSummary, Trigger


@dataclass(frozen=True, slots=True)
class StaleRecord:
    digest: str
    has_manifest: bool  # False: chunks (or an unfinished put) with no manifest


@dataclass(frozen=True, slots=True)
class RecordRemoval:
    manifest: bool  # the manifest was deleted
    chunks: int  # chunks deleted

    @property
    def removed(self) -> bool:
        return self.manifest or self.chunks > 0


class Store(Protocol):
    # --- principals: token hashes only ---------------------------------------------
    def create_principal(self, principal: Principal, token_hash: str) -> bool:
        """Store an owner or agent with the hash of its token; False if the id or hash exists."""
        ...

    def get_principal(self, principal_id: str) -> Principal | None: ...

    def list_agents(self) -> list[Principal]: ...

    def find_principal_by_token_hash(self, token_hash: str) -> Principal | None:
        """The live principal this token hash names; None if unknown or revoked."""
        ...

    def revoke_principal(self, principal_id: str) -> bool:
        """Revoke for good: its token hash stops resolving. False if unknown."""
        ...

    # --- projects, members, forks, packets --------------------------------------------
    def create_project(self, project: Project) -> bool:
        """False if the id exists. `settings=None` stores a legacy project."""
        ...

    def get_project(self, project_id: str) -> Project | None:
        """The project, with `LEGACY_SETTINGS` filled in when none were stored."""
        ...

    def list_projects(self) -> list[Project]: ...

    def set_settings(self, project_id: str, settings: ProjectSettings) -> bool: ...

    def set_policy(self, project_id: str, policy: ProjectPolicy) -> bool:
        """Replace the project's policy (settings untouched); False if the project is unknown."""
        ...

    def add_member(self, project_id: str, agent_id: str) -> None: ...

    def is_member(self, project_id: str, agent_id: str) -> bool: ...

    def list_members(self, project_id: str) -> list[str]: ...

    def create_fork(self, fork: Fork) -> bool:
        """False if the fork id exists in its project."""
        ...

    def get_fork(self, project_id: str, fork_id: str) -> Fork | None: ...

    def list_forks(self, project_id: str) -> list[Fork]: ...

    def create_packet(self, packet: Packet) -> bool: ...

    def get_packet(self, project_id: str, packet_id: str) -> Packet | None: ...

    def list_packets(self, project_id: str) -> list[Packet]: ...

    # --- claims: leases on packets -----------------------------------------------------
    def claim_packet(
        self, packet_id: str, agent_id: str, ttl: timedelta, now: datetime
    ) -> Claim | None:
        """Claim or renew (the caller's own live claim) until `now + ttl`.

        None while another agent holds a live claim.
        """
        ...

    def release_claim(self, packet_id: str, agent_id: str) -> bool:
        """Drop the agent's claim; False if the agent holds none."""
        ...

    def live_claim(self, packet_id: str, now: datetime) -> Claim | None: ...

    # --- reviews and their current execution ----------------------------------------
    def create_review(self, review: Review) -> bool:
        """False if the id exists. The review may already carry its first execution."""
        ...

    def get_review(self, review_id: str) -> Review | None: ...

    def list_reviews(self, project_id: str) -> list[Review]:
        """The project's reviews, oldest first."""
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

    # --- promotions and the ledger --------------------------------------------------
    def request_promotion(self, promotion: Promotion, now: datetime) -> bool:
        """Record a `queued` promotion: its job is requested, not yet under the lease, and
        fences nothing. False if the id exists, or while another requested promotion of
        the same review may still run (`Promotion.job_is_live` at `now`)."""
        ...

    def begin_promotion(self, promotion: Promotion, fencing_token: int, now: datetime) -> bool:
        """Record `promotion` as pending: the queued promotion with its id moves to pending
        (taking the fields given), or a new one is stored. False while another promotion
        of the project is open (pending, writing or uncertain: the fence), if the id
        exists in any state but queued, or if `fencing_token` no longer holds the
        project's live workflow lease."""
        ...

    def arm_promotion(
        self,
        project_id: str,
        promotion_id: str,
        digest: str | None,
        fencing_token: int,
        now: datetime,
    ) -> bool:
        """Move a pending promotion to `writing` with the digest it rests on, right before
        the canonical write. False unless it is pending and `fencing_token` still holds
        the project's live workflow lease."""
        ...

    def settle_promotion(
        self,
        project_id: str,
        promotion_id: str,
        state: SettledState,
        ledger_entry: LedgerEntry | None,
        now: datetime,
        refusal: Refusal | None = None,
    ) -> bool:
        """Move a queued promotion to failed; a pending or writing one to
        done/failed/uncertain; or reconcile an uncertain one to done/failed. `done` needs
        its ledger entry, written in the same transaction; only `failed` may carry the
        refusal its job answers with. done/failed lift the fence; uncertain keeps it."""
        ...

    def get_promotion(self, project_id: str, promotion_id: str) -> Promotion | None: ...

    def list_promotions(self, project_id: str) -> list[Promotion]: ...

    def open_promotion(self, project_id: str) -> Promotion | None:
        """The pending, writing or uncertain promotion fencing this project, if any."""
        ...

    def ledger(self, project_id: str) -> list[LedgerEntry]:
        """Done promotions, oldest first."""
        ...

    # --- the per-project workflow lease ---------------------------------------------
    def acquire_lease(
        self, project_id: str, holder: str, ttl: timedelta, now: datetime
    ) -> int | None:
        """Take the lease if it is free, expired or already the holder's; returns a new
        fencing token, greater than every earlier one. None while someone else holds it."""
        ...

    def renew_lease(
        self, project_id: str, holder: str, token: int, ttl: timedelta, now: datetime
    ) -> bool: ...

    def release_lease(self, project_id: str, holder: str, token: int) -> bool: ...

    def check_fence(self, project_id: str, token: int, now: datetime) -> bool:
        """True while `token` is the project's current, live lease."""
        ...

    # --- immutable, content-addressed records ----------------------------------------
    def put_record_chunks(self, digest: str, chunks: Sequence[str], now: datetime) -> None:
        """Write every chunk, then the manifest last (a record is visible whole or not
        at all), all written at `now`. Idempotent: putting a stored digest again only moves
        its written-at time to `now`, so a collection racing the put keeps it.

        The manifest appears only while every chunk exists: if a collection removed a chunk
        of this unfinished put, the put writes it again before publishing."""
        ...

    def get_record_chunks(self, digest: str) -> list[str] | None:
        """The chunks in order, or None if no manifest exists. Not verified here."""
        ...

    def stale_records(self, written_before: datetime) -> Iterator[StaleRecord]:
        """Every digest with a manifest, chunk or unfinished put written before
        `written_before` (each digest about once), and whether its manifest exists."""
        ...

    def delete_stale_record(self, digest: str, written_before: datetime) -> RecordRemoval:
        """Delete the manifest if written before `written_before`, then every chunk written
        before it, but never a chunk while a manifest or a newer unfinished put of the
        digest exists (so a put racing the deletion ends whole or not at all)."""
        ...

    # --- Flow-Next review receipts ----------------------------------------------------
    def put_review_receipt(self, review_id: str, digest: str) -> None:
        """Attach a stored Flow-Next receipt record to a review (idempotent)."""
        ...

    def list_review_receipts(self, review_id: str) -> list[str]:
        """Digests attached to the review, sorted (lineage comes from the receipts)."""
        ...

    def close(self) -> None: ...
