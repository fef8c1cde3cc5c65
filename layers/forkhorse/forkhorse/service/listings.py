"""The reviews a caller may see: the active ones `/state` shows, the project's history one
page at a time behind an opaque cursor, and one review by its id.

A review is *active* while it is the newest review of its packet from its fork; a newer
review of the same packet from the same fork replaces it (the older one's commit is no
longer that fork's work on the packet). `/state` shows every active review, complete;
`GET /projects/{id}/reviews` pages through all of them, newest first. So `/state` costs
what it shows (at most one review per fork and packet), not the project's history.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from forkhorse.domain.limits import REVIEW_PAGE
from forkhorse.domain.model import LedgerEntry, Project, Promotion, Review
from forkhorse.service.context import Context
from forkhorse.service.errors import REVIEW_NOT_FOUND, BadRequest, NotFound
from forkhorse.service.identity import Caller
from forkhorse.service.responses import ReviewBody, ReviewPage, ReviewView
from forkhorse.service.views import done_promotions, review_view

BAD_CURSOR = "The cursor is not one this API issued for this project."
BAD_LIMIT = f"The page size must be 1 to {REVIEW_PAGE.max_size}."
_CURSOR_PREFIX = "before:"


def may_see_review(caller: Caller, review: Review, published: set[str]) -> bool:
    """Agents see their own reviews, and others' only once their commit is on canonical (a
    fork head nobody promoted is that agent's unpublished work); owners see every review."""
    return caller.is_owner or review.agent_id == caller.id or review.commit in published


def review_views(
    caller: Caller,
    reviews: Iterable[Review],
    ledger: list[LedgerEntry],
    promotions: Iterable[Promotion],
) -> list[ReviewView]:
    """The reviews the caller may see, in wire form, each with its latest done promotion."""
    promoted = done_promotions(promotions, ledger)
    published = {entry.commit for entry in ledger}
    return [
        review_view(review, promoted.get(review.id))
        for review in reviews
        if may_see_review(caller, review, published)
    ]


def review_cursor(review_id: str) -> str:
    """Opaque to clients: the page continues after (older than) this review."""
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{review_id}".encode()).decode().rstrip("=")


def review_before(cursor: str) -> str:
    """The review a cursor continues after; a 400 for anything this API did not issue."""
    if len(cursor) > REVIEW_PAGE.cursor_chars:
        raise BadRequest(BAD_CURSOR)
    try:
        decoded = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest(BAD_CURSOR) from None
    review_id = decoded.removeprefix(_CURSOR_PREFIX)
    if review_id == decoded or not review_id:
        raise BadRequest(BAD_CURSOR)
    return review_id


class ReviewListings:
    def __init__(self, context: Context) -> None:
        self._c = context

    def _views(self, caller: Caller, project: Project, reviews: list[Review]) -> list[ReviewView]:
        store = self._c.store
        ledger = store.ledger(project.id)
        return review_views(caller, reviews, ledger, store.list_promotions(project.id))

    def page(
        self, caller: Caller, project_id: str, cursor: str | None, limit: int | None
    ) -> ReviewPage:
        """One page of the project's reviews, newest first. A page may hold fewer than
        `limit` reviews (an agent does not see others' unpublished ones) while `next` still
        leads on; the listing ends where `next` is null."""
        project = self._c.visible_project(caller, project_id, "list reviews")
        size = REVIEW_PAGE.default_size if limit is None else limit
        if not 1 <= size <= REVIEW_PAGE.max_size:
            raise BadRequest(BAD_LIMIT)
        before = None if cursor is None else review_before(cursor)
        # One more than the page shows tells whether another page follows.
        found = self._c.store.list_reviews_page(project.id, before, size + 1)
        if found is None:
            raise BadRequest(BAD_CURSOR)
        shown = found[:size]
        more = len(found) > size
        return ReviewPage(
            reviews=self._views(caller, project, shown),
            next=review_cursor(shown[-1].id) if more else None,
        )

    def review(self, caller: Caller, project_id: str, review_id: str) -> ReviewBody:
        """One review, as `/state` or a page shows it; 404 for one the caller may not see."""
        project = self._c.visible_project(caller, project_id, "read reviews")
        review = self._c.project_review(project, review_id)
        views = self._views(caller, project, [review])
        if not views:
            raise NotFound(REVIEW_NOT_FOUND)
        return ReviewBody(review=views[0])
