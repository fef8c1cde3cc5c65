"""Flow-Next review receipts over both stores (issue 16): what a receipt may be on the way in,
what a stored row may be on the way out, and one content per generation id."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from forkhorse import records
from forkhorse.domain.limits import REVIEW_RECEIPTS
from forkhorse.domain.strict_json import LONE_SURROGATE, NOT_FINITE
from forkhorse.ports.store import Store
from forkhorse.service.errors import BadRequest, Conflict
from forkhorse.service.review_receipts import ReviewReceipts

from tests.support.nesting import nested_arrays
from tests.support.store import T0

RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}
REFUSED = "The review receipt is refused: "
DEPTH = REVIEW_RECEIPTS.json_depth


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (float("nan"), NOT_FINITE),
        (float("inf"), NOT_FINITE),
        ("\ud800", LONE_SURROGATE),
        (nested_arrays(DEPTH), f"The body nests JSON deeper than the limit of {DEPTH} levels."),
        (nested_arrays(5_000), f"The body nests JSON deeper than the limit of {DEPTH} levels."),
        (10**200, "The body has a number longer than the limit of 100 characters."),
    ],
    ids=["nan", "infinity", "lone-surrogate", "one-level-too-deep", "5000-deep", "200-digits"],
)
def test_a_receipt_built_in_process_is_held_to_the_body_rules(
    store: Store, extra: object, error: str
) -> None:
    """The API's guard refuses these bodies first; a caller inside the process meets the
    same rules instead of a 500 at storage."""
    receipts = ReviewReceipts(store, REVIEW_RECEIPTS)
    with pytest.raises(BadRequest) as refused:
        receipts.canonical({**RECEIPT, "x": extra})
    assert refused.value.kind == "invalid"
    assert refused.value.message == REFUSED + error


def test_a_receipt_at_the_depth_bound_is_stored_and_read_back(store: Store) -> None:
    receipts = ReviewReceipts(store, REVIEW_RECEIPTS)
    body = {**RECEIPT, "x": nested_arrays(DEPTH - 1)}
    encoded = receipts.canonical(body)
    digest = records.put_json(store, body, T0)
    store.put_review_receipt("r1", digest)
    fresh = ReviewReceipts(store, REVIEW_RECEIPTS)  # nothing cached: read from the store
    lineage = fresh.lineage("r1")
    assert [stored.value for stored in lineage.readable] == [body]
    assert lineage.readable[0].size == len(encoded)
    assert lineage.unreadable == ()


def _seed(store: Store, text: str) -> str:
    """A row as a hand edit or an older version could have left it: it matches its digest."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    store.put_record_chunks(digest, [text.encode()], T0)
    store.put_review_receipt("r1", digest)
    return digest


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"impl_review","x":NaN}',
        '{"type":"impl_review","x":"\\ud800"}',
        '{"x":' + "[" * 252 + "]" * 252 + "}",
        '{"x":' + "[" * DEPTH + "]" * DEPTH + "}",
        '{"x":"' + "y" * REVIEW_RECEIPTS.receipt_bytes + '"}',
        "{",
    ],
    ids=["nan", "lone-surrogate", "252-deep", "one-level-too-deep", "too-large", "not-json"],
)
def test_a_hostile_stored_row_is_unreadable_never_an_error(store: Store, text: str) -> None:
    good = records.put_json(store, RECEIPT, T0)
    store.put_review_receipt("r1", good)
    hostile = _seed(store, text)
    lineage = ReviewReceipts(store, REVIEW_RECEIPTS).lineage("r1")
    assert [stored.digest for stored in lineage.readable] == [good]
    assert lineage.unreadable == (hostile,)


def _with_findings(source: str, title: str) -> dict[str, Any]:
    return {**RECEIPT, "findings": {"sourceReceiptId": source, "title": title}}


def test_a_generation_id_names_one_content(store: Store) -> None:
    receipts = ReviewReceipts(store, REVIEW_RECEIPTS)
    first = _with_findings("review-1", "A")
    digest = records.put_json(store, first, T0)
    store.put_review_receipt("r1", digest)
    lineage = receipts.lineage("r1")
    receipts.check_generation(lineage, digest, first)  # the same receipt again
    receipts.check_generation(lineage, "0" * 64, _with_findings("review-2", "A"))
    receipts.check_generation(lineage, "0" * 64, RECEIPT)  # no findings, no generation id
    with pytest.raises(Conflict) as refused:
        receipts.check_generation(lineage, "0" * 64, _with_findings("review-1", "B"))
    assert refused.value.kind == "conflict"
    assert refused.value.message == (
        f"The review already has receipt {digest} with sourceReceiptId 'review-1'; "
        "a generation id cannot name different content."
    )
