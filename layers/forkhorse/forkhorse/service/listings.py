"""What a caller may list: the active reviews `/state` shows, the project's reviews and
its ledger one page at a time behind an opaque cursor, and one review by its id.

A review is *active* while it is the newest review of its packet from its fork; a newer
review of the same packet from the same fork replaces it (the older one's commit is no
longer that fork's work on the packet). `/state` shows every active review, complete, and
the newest ledger entries; `GET /projects/{id}/reviews` and `GET /projects/{id}/ledger`
page through all of them, newest first. A review's promotion and visibility are read for
that review alone. So `/state` and every page cost what they show, not the project's
history.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from forkhorse.domain.limits import PAGE
from forkhorse.domain.log_entries import receipt_key
from forkhorse.domain.model import LedgerEntry, Packet, Review
from forkhorse.ports.store import PromotionStore
from forkhorse.responses import (
    LedgerEntryBody,
    LedgerPage,
    LedgerView,
    PacketPage,
    ReviewBody,
    ReviewPage,
    ReviewView,
)
from forkhorse.service.context import Context, may_see_review
from forkhorse.service.errors import BadRequest, NotFound
from forkhorse.service.identity import Caller
from forkhorse.service.views import (
    done_promotion,
    ledger_view,
    packet_state,
    review_detail,
    review_view,
)

BAD_CURSOR = "The cursor is not one this API issued for this project."
BAD_LIMIT = f"The page size must be 1 to {PAGE.max_size}."
LEDGER_ENTRY_NOT_FOUND = "Ledger entry not found."
_CURSOR_PREFIX = "before:"


def review_views(
    caller: Caller, promotions: PromotionStore, project_id: str, reviews: list[Review]
) -> list[ReviewView]:
    """The reviews the caller may see, in wire form, each with its latest done promotion."""
    others = {r.commit for r in reviews if not caller.is_owner and r.agent_id != caller.id}
    published = promotions.published_commits(project_id, others) if others else set()
    shown = [review for review in reviews if may_see_review(caller, review, published)]
    promoted = promotions.done_promotions(project_id, [review.id for review in shown])
    return [
        review_view(review, done_promotion(*promoted[review.id]) if review.id in promoted else None)
        for review in shown
    ]


def newest_ledger(
    promotions: PromotionStore, project_id: str
) -> tuple[list[LedgerView], str | None]:
    """`/state`'s ledger: the newest entries, oldest first, and the cursor of the older."""
    found = promotions.ledger_page(project_id, None, PAGE.state_ledger + 1)
    shown, more = _paged(found, PAGE.state_ledger, _entry_id)
    return [ledger_view(entry) for entry in reversed(shown)], more


def page_cursor(item_id: str) -> str:
    """Opaque to clients: the page continues after (older than) this review or entry."""
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{item_id}".encode()).decode().rstrip("=")


def cursor_item(cursor: str) -> str:
    """The review or entry a cursor continues after; a 400 for anything this API did not
    issue."""
    if len(cursor) > PAGE.cursor_chars:
        raise BadRequest(BAD_CURSOR)
    try:
        decoded = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest(BAD_CURSOR) from None
    item_id = decoded.removeprefix(_CURSOR_PREFIX)
    if item_id == decoded or not item_id:
        raise BadRequest(BAD_CURSOR)
    return item_id


def _page_size(limit: int | None) -> int:
    size = PAGE.default_size if limit is None else limit
    if not 1 <= size <= PAGE.max_size:
        raise BadRequest(BAD_LIMIT)
    return size


def _paged[T](
    found: list[T] | None, size: int, key: Callable[[T], str]
) -> tuple[list[T], str | None]:
    """A page read one longer than it shows (so the extra one tells whether another page
    follows), and the next page's cursor; None from the store is a cursor it did not know."""
    if found is None:
        raise BadRequest(BAD_CURSOR)
    shown = found[:size]
    return shown, page_cursor(key(shown[-1])) if len(found) > size else None


def _entry_id(entry: LedgerEntry) -> str:
    return entry.promotion_id


def _review_id(review: Review) -> str:
    return review.id


def _packet_id(packet: Packet) -> str:
    return packet.id


class Listings:
    def __init__(self, context: Context) -> None:
        self._c = context

    def page(
        self, caller: Caller, project_id: str, cursor: str | None, limit: int | None
    ) -> ReviewPage:
        """One page of the project's reviews, newest first. A page may hold fewer than
        `limit` reviews (an agent does not see others' unpublished ones) while `next` still
        leads on; the listing ends where `next` is null."""
        project = self._c.visible_project(caller, project_id, "list reviews")
        size = _page_size(limit)
        before = None if cursor is None else cursor_item(cursor)
        found = self._c.store.list_reviews_page(project.id, before, size + 1)
        shown, more = _paged(found, size, _review_id)
        return ReviewPage(reviews=review_views(caller, self._c.store, project.id, shown), next=more)

    def ledger(
        self, caller: Caller, project_id: str, cursor: str | None, limit: int | None
    ) -> LedgerPage:
        """One page of the project's ledger, newest first; the listing ends where `next` is
        null. Whoever may read `/state` may read the whole ledger."""
        project = self._c.visible_project(caller, project_id, "read the ledger")
        size = _page_size(limit)
        before = None if cursor is None else cursor_item(cursor)
        found = self._c.store.ledger_page(project.id, before, size + 1)
        shown, more = _paged(found, size, _entry_id)
        return LedgerPage(ledger=[ledger_view(entry) for entry in shown], next=more)

    def ledger_entry(self, caller: Caller, project_id: str, promotion_id: str) -> LedgerEntryBody:
        """One ledger entry, by its promotion's id (a done promotion's `links.ledger`)."""
        project = self._c.visible_project(caller, project_id, "read the ledger")
        entry = self._c.store.ledger_entry(project.id, promotion_id)
        if entry is None:
            raise NotFound(LEDGER_ENTRY_NOT_FOUND)
        return LedgerEntryBody(entry=ledger_view(entry))

    def packets(
        self, caller: Caller, project_id: str, cursor: str | None, limit: int | None
    ) -> PacketPage:
        """One page of the project's packets in id order, each with its live claim, for its
        owner and its members: what an agent may claim (`claim` null) and who holds the
        rest. The page and the claims read for it are bounded by the page size."""
        project = self._c.visible_project(caller, project_id, "list packets")
        size = _page_size(limit)
        packets = self._c.store.list_packets(project.id)
        start = 0
        if cursor is not None:
            after = cursor_item(cursor)
            ids = [packet.id for packet in packets]
            if after not in ids:
                raise BadRequest(BAD_CURSOR)
            start = ids.index(after) + 1
        shown, more = _paged(packets[start : start + size + 1], size, _packet_id)
        claims = self._c.store.live_claims([p.id for p in shown], self._c.clock.now())
        return PacketPage(packets=[packet_state(p, claims.get(p.id)) for p in shown], next=more)

    def review(self, caller: Caller, project_id: str, review_id: str) -> ReviewBody:
        """One review, as `/state` or a page shows it; 404 for one the caller may not see."""
        project = self._c.visible_project(caller, project_id, "read reviews")
        review = self._c.visible_review(caller, project, review_id)
        [view] = review_views(caller, self._c.store, project.id, [review])
        return ReviewBody(review=review_detail(view, self._receipt_log_index(view)))

    def _receipt_log_index(self, view: ReviewView) -> int | None:
        """The attached receipt's index in the log: one ledger read, so only for one review
        (a page would read one per row); None without a receipt, an entry or a log."""
        log = self._c.gate_log.log
        digest = None if view.receipt is None else view.receipt.digest
        if log is None or digest is None:
            return None
        return log.index_of(receipt_key(digest))
