"""A review read alone says where the transparency log holds its attached receipt
(`logEntry`: null until the entry exists), and `GET /log/entry/<index>` shows that entry
from the published tiles without a token: the bundle it names holds it and the signed tree
includes it. Real quick checks in bubblewrap on the live server."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from forkhorse import records
from forkhorse.api.log_files import NOT_FOUND, NOT_PUBLISHED
from forkhorse.domain.merkle import leaf_hash
from forkhorse.domain.tiles import TILE_WIDTH, parse_tile_path, split_entry_bundle
from forkhorse.responses import ReviewBody
from forkhorse.service.log_events import GateLog
from forkhorse.tlog.verify import LogKey, check_inclusion, fetch_checkpoint
from forkhorse.wiring.local import LOG_DIR

from tests.integration.api.support import checks_files
from tests.integration.log.test_log_local import HttpSource
from tests.support.live import Project, Server, new_lane

QUICK_ONLY = checks_files(quick=True)


def _entry_bytes(server: Server, shown: dict[str, Any]) -> bytes:
    """The entry's bytes as its bundle (the path the view names) holds them."""
    path = shown["bundle"].removeprefix("/log/")
    response = requests.get(f"{server.url}{shown['bundle']}", timeout=30)
    assert response.status_code == 200, response.text
    bundle = split_entry_bundle(parse_tile_path(path), response.content)
    return bundle[int(shown["index"]) % TILE_WIDTH]


def _signed_tree_includes(server: Server, index: int, entry: bytes) -> None:
    key = server.client(None).ok("GET", "/log/key")
    source = HttpSource(server.url)
    checkpoint, _ = fetch_checkpoint(source, LogKey(key["origin"], key["publicKey"]))
    check_inclusion(source, checkpoint, index, entry)


def test_a_review_links_its_receipt_to_the_log_entry_anyone_can_read(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    commit = lane.push(QUICK_ONLY)
    requested = lane.request_review(commit)
    assert requested["logEntry"] is None  # running: no record, no entry
    review = server.owner.wait_receipt(required.id, requested["id"])
    digest = review["receipt"]["digest"]
    index = review["logEntry"]["index"]
    assert review["logEntry"] == {
        "index": index,
        "entry": f"/log/entry/{index}",
        "checkpoint": "/log/checkpoint",
    }
    # The client's model reads it; the agent sees the same link; the lists leave it out
    # (they would read the ledger once per row).
    body = server.owner.ok("GET", required.review_path(review["id"]))
    parsed = ReviewBody.model_validate(body).review.log_entry
    assert parsed is not None
    assert parsed.index == index
    assert lane.agent.review(required.id, review["id"])["logEntry"] == review["logEntry"]
    assert "logEntry" not in server.owner.state(required.id)["reviews"][0]

    shown = server.client(None).ok("GET", f"/log/entry/{index}")
    assert shown["index"] == index
    assert shown["entry"] == {
        "v": 1,
        "project": required.id,
        "kind": "receipt",
        "subject": {
            "commit": commit,
            "review": review["id"],
            "record": digest,
            "status": "passed",
            "mocked": False,
        },
        "digest": shown["entry"]["digest"],
        "key": f"receipt/{digest}",
    }
    entry = _entry_bytes(server, shown)
    assert json.loads(entry) == shown["entry"]
    assert shown["leafHash"] == leaf_hash(entry).hex()
    _signed_tree_includes(server, index, entry)


def test_a_receipt_has_no_log_entry_until_one_is_appended(
    server: Server, required: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finalize step that crashed before its append: the record is attached, the log
    does not hold it, and the review says so until the entry is appended."""
    lane = new_lane(required)
    with monkeypatch.context() as crashed:
        crashed.setattr(GateLog, "receipt", lambda *_: None)
        commit = lane.push(QUICK_ONLY)
        review = server.owner.wait_receipt(required.id, lane.request_review(commit)["id"])
    digest = review["receipt"]["digest"]
    assert digest is not None
    assert review["logEntry"] is None

    record = records.get_record(server.app.runtime.store, digest)
    assert record is not None
    index = server.app.runtime.deps.gate_log.receipt(record, digest)
    assert index is not None
    linked = server.owner.review(required.id, review["id"])["logEntry"]
    assert linked == {
        "index": index,
        "entry": f"/log/entry/{index}",
        "checkpoint": "/log/checkpoint",
    }
    assert server.client(None).ok("GET", linked["entry"])["entry"]["key"] == f"receipt/{digest}"


@pytest.mark.usefixtures("required")  # its settings and import are logged
def test_only_published_entries_are_shown_and_each_by_one_path(server: Server) -> None:
    public = server.client(None)
    size = public.ok("GET", "/log")["size"]
    assert public.ok("GET", f"/log/entry/{size - 1}")["index"] == size - 1
    assert public.call("GET", f"/log/entry/{size}") == (404, {"error": NOT_PUBLISHED})
    for path in ("/log/entry/", "/log/entry/01", "/log/entry/-1", "/log/entry/x", "/log/entry"):
        assert public.call("GET", path) == (404, {"error": NOT_FOUND}), path
    status, _ = public.call("POST", "/log/entry/0")
    assert status == 405


@pytest.mark.usefixtures("required")
def test_a_bundle_changed_on_disk_is_refused_not_shown(server: Server) -> None:
    public = server.client(None)
    shown = public.ok("GET", "/log/entry/0")
    bundle = server.home / LOG_DIR / shown["bundle"].removeprefix("/log/")
    original = bundle.read_bytes()
    bundle.write_bytes(original[:-1])  # the last entry cut short
    try:
        status, refused = public.call("GET", "/log/entry/0")
    finally:
        bundle.write_bytes(original)
    assert status == 409
    assert refused["error"].startswith("The log's files are refused: ")
    assert public.ok("GET", "/log/entry/0") == shown
