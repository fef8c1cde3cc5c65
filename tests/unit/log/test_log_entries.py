"""Log entries (domain/log_entries.py): one event has one canonical form, and bytes that are
not an entry this version writes are refused rather than read leniently."""

from __future__ import annotations

import json

import pytest
from forkhorse.domain.log_entries import (
    MAX_ENTRY_BYTES,
    EntryRefused,
    PromotionSubject,
    ReceiptSubject,
    make_entry,
    object_digest,
    parse_entry,
)

COMMIT = "a" * 40
DIGEST = object_digest(b"envelope")


def _receipt() -> bytes:
    subject = ReceiptSubject(
        commit=COMMIT, review="r1", record="b" * 64, status="passed", mocked=False
    )
    return make_entry("p", subject, DIGEST, "receipt/" + "b" * 64).to_bytes()


def test_an_entry_round_trips_in_its_canonical_form() -> None:
    data = _receipt()
    entry = parse_entry(data)
    assert (entry.kind, entry.project, entry.subject["commit"]) == ("receipt", "p", COMMIT)
    assert entry.to_bytes() == data
    assert data == json.dumps(json.loads(data), sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda e: {**e, "kind": "merge"}, "kind"),
        (lambda e: {**e, "extra": 1}, "extra"),
        (lambda e: {**e, "digest": "sha1:00"}, "digest"),
        (lambda e: {**e, "subject": {**e["subject"], "commit": "zz"}}, "commit"),
        (lambda e: {**e, "subject": {**e["subject"], "mocked": "no"}}, "mocked"),
        (lambda e: {**e, "v": 2}, "v"),
    ],
)
def test_an_entry_that_is_not_one_is_refused(change, why: str) -> None:  # type: ignore[no-untyped-def]
    data = json.dumps(change(json.loads(_receipt())), sort_keys=True, separators=(",", ":"))
    with pytest.raises(EntryRefused, match="not a log entry"):
        parse_entry(data.encode())


def test_the_same_entry_spelled_another_way_is_refused() -> None:
    spaced = json.dumps(json.loads(_receipt()), sort_keys=True).encode()
    with pytest.raises(EntryRefused, match="canonical form"):
        parse_entry(spaced)


def test_an_entry_is_bounded() -> None:
    subject = PromotionSubject(
        commit=COMMIT, review="r" * 5000, promotion="x", previous=None, mode="required"
    )
    with pytest.raises(EntryRefused, match=f"at most {MAX_ENTRY_BYTES} bytes"):
        make_entry("p", subject, DIGEST, "promotion/p/x").to_bytes()
