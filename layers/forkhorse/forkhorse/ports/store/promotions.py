"""Promotions (queued, fenced, settled) and the ledger of done ones."""

from collections.abc import Collection
from datetime import datetime
from typing import Protocol

from forkhorse.domain.model import LedgerEntry, Promotion, Refusal, SettledState


class PromotionStore(Protocol):
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

    def latest_promotion(self, project_id: str, review_id: str) -> Promotion | None:
        """The review's most recently requested promotion, in whatever state."""
        ...

    def open_promotion(self, project_id: str) -> Promotion | None:
        """The pending, writing or uncertain promotion fencing this project, if any."""
        ...

    def ledger(self, project_id: str) -> list[LedgerEntry]:
        """Done promotions, oldest first: the whole history, for the collector."""
        ...

    # What a listing reads: each costs what it returns, never the project's history.
    def ledger_entry(self, project_id: str, promotion_id: str) -> LedgerEntry | None:
        """The entry the done promotion `promotion_id` wrote."""
        ...

    def ledger_page(
        self, project_id: str, before_promotion_id: str | None, limit: int
    ) -> list[LedgerEntry] | None:
        """Up to `limit` entries, newest first, older than `before_promotion_id`'s (from the
        newest when None); None when that promotion wrote no entry in this project."""
        ...

    def done_promotions(
        self, project_id: str, review_ids: Collection[str]
    ) -> dict[str, tuple[Promotion, LedgerEntry]]:
        """Each of these reviews' latest done promotion and its entry; the unpromoted are
        absent."""
        ...

    def published_commits(self, project_id: str, commits: Collection[str]) -> set[str]:
        """Those of `commits` that a done promotion put on canonical."""
        ...
