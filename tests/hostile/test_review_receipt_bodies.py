"""Flow-Next review receipts against a real `forkhorse serve` (issue 16): receipt bodies are
bounded in depth as well as size, no stored row can make a listing fail, and a generation id
(`findings.sourceReceiptId`) names one receipt's content."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing

import pytest
from forkhorse.domain.limits import REVIEW_RECEIPTS

from tests.hostile.test_api_input import Live, live  # noqa: F401  # a server of its own
from tests.support.nesting import nested_arrays
from tests.unit.flow.flow_factories import container, item, receipt

RECEIPT = {"type": "impl_review", "mode": "codex", "verdict": "SHIP"}
DEPTH = REVIEW_RECEIPTS.json_depth
TOO_DEEP = (
    f"The review receipt is refused: The body nests JSON deeper than the limit of {DEPTH} levels."
)


def _seed(live: Live, review: str, text: str) -> str:  # noqa: F811
    """Store `text` as a receipt row directly, as a hand edit or an older version could."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    with closing(sqlite3.connect(live.home / "forkhorse.sqlite3", timeout=30)) as db, db:
        db.execute("INSERT INTO records (digest, chunk_count) VALUES (?, 1)", (digest,))
        db.execute(
            "INSERT INTO record_chunks (digest, idx, chunk) VALUES (?, 0, ?)", (digest, text)
        )
        db.execute(
            "INSERT INTO review_receipts (review_id, digest) VALUES (?, ?)", (review, digest)
        )
    return digest


def test_a_receipt_is_bounded_in_depth_and_one_at_the_bound_lists(live: Live) -> None:  # noqa: F811
    path = live.receipts_path(live.reviews[0])
    before = live.owner.ok("GET", path)
    deeper = {**RECEIPT, "x": nested_arrays(DEPTH)}  # the receipt object is one more level
    status, body = live.agent.call("POST", path, deeper)
    assert (status, body) == (400, {"error": TOO_DEEP})
    assert live.owner.ok("GET", path) == before
    at_bound = {**RECEIPT, "x": nested_arrays(DEPTH - 1)}
    assert live.agent.call("POST", path, at_bound)[0] == 201
    listing = live.owner.ok("GET", path)
    assert [entry["receipt"] for entry in listing["receipts"]] == [at_bound]


HOSTILE_ROWS = [
    pytest.param('{"type":"impl_review","x":NaN}', id="nan"),
    pytest.param('{"type":"impl_review","x":-Infinity}', id="infinity"),
    pytest.param('{"type":"impl_review","x":"\\ud800"}', id="lone-surrogate"),
    pytest.param('{"x":' + "[" * 252 + "]" * 252 + "}", id="252-deep"),
    pytest.param('{"x":' + "[" * DEPTH + "]" * DEPTH + "}", id="one-past-the-bound"),
    pytest.param('{"x":' + "7" * 5_000 + "}", id="5000-digits"),
    pytest.param('{"x":' + "[" * 5_000 + "]" * 5_000 + "}", id="5000-deep"),
]


@pytest.mark.parametrize("text", HOSTILE_ROWS)
def test_a_hostile_stored_row_is_listed_as_unreadable_not_a_500(live: Live, text: str) -> None:  # noqa: F811
    review = live.reviews[1]
    readable = live.owner.ok("GET", live.receipts_path(review))["receipts"]
    digest = _seed(live, review, text)
    for client in (live.owner, live.agent):  # the console and the agent read the same
        status, listing = client.call("GET", live.receipts_path(review))
        assert status == 200, listing
        assert digest in listing["unreadable"]
        assert listing["receipts"] == readable
    # The review still takes receipts: classification never reads the hostile row.
    fresh = {**RECEIPT, "summary": f"after {digest[:8]}"}
    assert live.agent.call("POST", live.receipts_path(review), fresh)[0] == 201


def test_a_generation_id_names_one_content(live: Live) -> None:  # noqa: F811
    path = live.receipts_path(live.reviews[0])
    head = live.owner.review(live.project, live.reviews[0])["commit"]
    first = receipt(container("review-gen-1", [item("review-gen-1", 1, rIds=["R01"])], head=head))
    status, stored = live.agent.call("POST", path, first)
    assert status == 201
    assert stored["classification"]["findings"] == "current"
    count = len(live.owner.ok("GET", path)["receipts"])

    again = live.agent.call("POST", path, json.loads(json.dumps(first)))
    assert again == (201, stored)  # the same receipt again: same answer, nothing new stored
    assert len(live.owner.ok("GET", path)["receipts"]) == count

    reworded = item("review-gen-1", 1, rIds=["R01"], title="Reworded")
    other = receipt(container("review-gen-1", [reworded], head=head))
    status, body = live.agent.call("POST", path, other)
    assert status == 409
    assert body == {
        "error": f"The review already has receipt {stored['digest']} with sourceReceiptId "
        "'review-gen-1'; a generation id cannot name different content."
    }
    listing = live.owner.ok("GET", path)
    assert len(listing["receipts"]) == count
    current = [e for e in listing["receipts"] if e["digest"] == stored["digest"]]
    assert current[0]["classification"]["findings"] == "current"
