"""The transparency log in local mode, end to end: a real import, review, approval and
promotion each append their entry, the checkpoint and tiles are served without a token, and
everything verifies from the files alone (signature, root, inclusion, canonical's history)."""

from __future__ import annotations

import urllib.request
from urllib.error import HTTPError

from forkhorse.domain.log_entries import parse_entry
from forkhorse.tlog.verify import LogKey, all_entries, fetch_checkpoint

from tests.integration.api.support import PASSING
from tests.support.live import Project, Server, new_lane


class HttpSource:
    def __init__(self, base: str) -> None:
        self.base = base

    def read(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(f"{self.base}/log/{path}", timeout=30) as response:
                return bytes(response.read())
        except HTTPError as error:
            if error.code == 404:
                return None
            raise


def _key(server: Server) -> LogKey:
    body = server.client(None).ok("GET", "/log/key")
    return LogKey(body["origin"], body["publicKey"])


def test_every_gate_event_of_a_promotion_is_logged_in_order(
    server: Server, required: Project
) -> None:
    lane = new_lane(required)
    commit, review = lane.reviewed(PASSING)
    path = required.review_path(review["id"])
    assert server.owner.call("POST", f"{path}/approve", {"commit": commit})[0] == 200
    status, promoted = server.owner.promote(required.id, review["id"], commit)
    assert status == 200, promoted
    source = HttpSource(server.url)
    checkpoint, _ = fetch_checkpoint(source, _key(server))
    entries = [parse_entry(e) for e in all_entries(source, checkpoint)]
    mine = [(e.kind, e.subject.get("commit")) for e in entries if e.project == required.id]
    assert mine == [
        ("settings", None),
        ("import", required.initial),
        ("receipt", commit),
        ("approval", commit),
        ("receipt", commit),
        ("promotion", commit),
    ]
