"""The transparency log in local mode, end to end: a real import, review, approval and
promotion each append their entry, the checkpoint and tiles are served without a token, and
everything verifies from the files alone (signature, root, inclusion, canonical's history)."""

from __future__ import annotations

import json
import urllib.request
from urllib.error import HTTPError

import pytest
from forkhorse.cli import main
from forkhorse.domain.log_entries import DEPLOYMENT, parse_entry
from forkhorse.domain.tiles import ENTRIES_LEVEL, tile_for
from forkhorse.tlog.verify import (
    LogKey,
    LogRefused,
    all_entries,
    check_append_only,
    fetch_checkpoint,
)
from forkhorse.wiring.local import rotate_local_key

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


def test_log_check_finds_the_home_sound_then_names_an_edited_entry(
    server: Server, required: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    new_lane(required).reviewed(PASSING)
    home = ["--home", str(server.home)]
    assert main(["log-check", *home, "--full"]) == 0
    assert "sound" in capsys.readouterr().out
    size = server.client(None).ok("GET", "/log")["size"]
    bundle = server.home / "log" / tile_for(ENTRIES_LEVEL, 0, size).path()
    data = bundle.read_bytes()
    edited = data.replace(b'"passed"', b'"failed"', 1)
    assert edited != data, "the bundle holds a passing receipt to edit"
    bundle.write_bytes(edited)
    try:
        assert main(["log-check", *home, "--full", "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["ok"] is False
        assert any("in its bundle is not the entry the tree holds" in p for p in report["problems"])
        assert server.client(None).ok("GET", "/log")["lastCheck"]["ok"] is False
    finally:
        bundle.write_bytes(data)
    assert main(["log-check", *home, "--full"]) == 0


def test_a_rotated_key_is_logged_and_signs_the_next_checkpoint(
    server: Server, required: Project
) -> None:
    source = HttpSource(server.url)
    old_key = _key(server)
    before, _ = fetch_checkpoint(source, old_key)
    rotate_local_key(server.home)
    server.restart()
    new_key = _key(server)
    assert new_key.public_pem != old_key.public_pem
    after, _ = fetch_checkpoint(source, new_key)  # signed with the new key at once
    check_append_only(source, before, after)  # and the same history, grown by one entry
    entries = [parse_entry(e) for e in all_entries(source, after)]
    rotation = entries[-1]
    assert (rotation.kind, rotation.project) == ("key", DEPLOYMENT)
    assert rotation.subject["publicKey"] == new_key.public_pem
    with pytest.raises(LogRefused, match="no signature"):
        fetch_checkpoint(source, old_key)
