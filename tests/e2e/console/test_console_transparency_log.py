"""The transparency log in the console, in a real browser over the live server: the
projects page shows the signed size, the root (short, copied whole, shown whole), the
entries not signed yet, the last self-check and the checkpoint's signature checked with
WebCrypto; a changed tile shows as a failed self-check naming it, a forged checkpoint as a
signature that does not verify; the review page links its receipt to its log entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from forkhorse.domain.tiles import tile_for
from forkhorse.service.log_events import GateLog
from forkhorse.wiring.local import LOG_DIR
from playwright.sync_api import Route, ViewportSize, expect

from tests.integration.api.support import checks_files
from tests.support.console import DESKTOP, PHONE, Console
from tests.support.live import Server, new_lane, new_project

QUICK_ONLY = checks_files(quick=True)
SHORT_ROOT = 16


def _entries(count: int) -> str:
    return f"{count:,} {'entry' if count == 1 else 'entries'}"


def _full_self_check(server: Server) -> dict[str, Any]:
    """The home's self-check over the whole log, as its upkeep runs it (recorded for `/log`)."""
    return server.app.runtime.log_check.run(full=True)


def _reviewed(server: Server) -> tuple[str, dict[str, Any]]:
    project = new_project(server, True)
    lane = new_lane(project)
    review = lane.request_review(lane.push(QUICK_ONLY))
    return project.id, server.owner.wait_receipt(project.id, review["id"])


def test_the_log_panel_shows_the_signed_tree_and_a_review_links_its_receipts_entry(
    console: Console, server: Server
) -> None:
    project_id, review = _reviewed(server)
    status = server.client(None).ok("GET", "/log")
    key = server.client(None).ok("GET", "/log/key")
    root, check = status["root"], status["lastCheck"]
    console.sign_in()
    page = console.page
    panel = page.locator("#transparency-log")
    expect(panel.get_by_role("heading", name="Transparency log")).to_be_visible()
    expect(panel.locator("#log-origin")).to_have_text(key["origin"])
    expect(panel.locator("#log-size")).to_have_text(_entries(status["size"]))
    expect(panel.locator("#log-pending")).to_have_text(_entries(0))
    expect(panel.locator("#log-root")).to_have_text(f"{root[:SHORT_ROOT]}…")
    expect(panel.locator("#log-root")).to_have_attribute("title", root)
    page.get_by_role("button", name="Copy the root").click()
    assert page.evaluate("navigator.clipboard.readText()") == root
    expect(panel.locator("#log-root-full")).to_be_hidden()
    panel.get_by_text("Full root").click()
    expect(panel.locator("#log-root-full")).to_have_text(root)
    expect(panel.locator("#log-signature")).to_have_text(
        f"✓ Signed and verified in this browser with key {key['keyId']}: the tree of "
        f"{_entries(status['size'])}, root {root[:SHORT_ROOT]}…"
    )
    shown_at = page.evaluate("(at) => new Date(at).toLocaleString()", check["at"])
    expect(panel.locator("#log-check")).to_have_text(
        f"✓ Passed {shown_at}, on the tree of {_entries(check['size'])}"
    )
    console.screenshot("transparency-log-desktop")
    page.set_viewport_size(ViewportSize(width=PHONE["width"], height=PHONE["height"]))
    console.fits_width(PHONE["width"])
    console.screenshot("transparency-log-375px")
    page.set_viewport_size(ViewportSize(width=DESKTOP["width"], height=DESKTOP["height"]))

    console.open(f"#/p/{project_id}/r/{review['id']}")
    index = review["logEntry"]["index"]
    link = page.get_by_role("link", name=f"log entry #{index}")
    console.screenshot("review-log-entry-desktop")
    with page.expect_response(f"**/log/entry/{index}") as answer:
        link.click()
    assert page.url == f"{server.url}/log/entry/{index}"
    shown = answer.value.json()
    assert shown["index"] == index
    assert shown["entry"]["key"] == f"receipt/{review['receipt']['digest']}"
    assert shown["entry"]["subject"]["review"] == review["id"]


@pytest.fixture
def changed_tile(server: Server) -> Iterator[str]:
    """A hash tile of the published tree with one byte changed, and a full self-check that
    found it; restored (and checked again) afterwards, for the module's other tests."""
    size = server.client(None).ok("GET", "/log")["size"]
    path = tile_for(0, 0, size).path()
    tile = Path(server.home) / LOG_DIR / path
    original = tile.read_bytes()
    tile.write_bytes(bytes([original[0] ^ 1]) + original[1:])
    try:
        report = _full_self_check(server)
        assert report["ok"] is False
        yield str(report["problems"])
    finally:
        tile.write_bytes(original)
        assert _full_self_check(server)["ok"] is True


def test_a_changed_tile_and_a_forged_checkpoint_read_as_failures(
    console: Console, server: Server, changed_tile: str
) -> None:
    page = console.page

    def forged(route: Route) -> None:
        note = route.fetch().text()
        body, signatures = note.split("\n\n")
        origin, size, *rest = body.split("\n")
        forged_body = "\n".join([origin, str(int(size) + 1), *rest])
        route.fulfill(status=200, content_type="text/plain", body=f"{forged_body}\n\n{signatures}")

    page.route("**/log/checkpoint", forged)
    console.sign_in()
    panel = page.locator("#transparency-log")
    expect(panel.locator("#log-check")).to_contain_text("✗ Failed")
    problem = panel.locator("#log-problems li")
    expect(problem).to_have_count(1)
    expect(problem).to_contain_text("the tiles do not hash to the checkpoint's root")
    assert "the tiles do not hash" in changed_tile
    origin = server.client(None).ok("GET", "/log/key")["origin"]
    expect(panel.locator("#log-signature")).to_have_text(
        f"✗ Failed The signature of {origin} does not verify."
    )


def test_a_receipt_the_log_does_not_hold_says_so_on_its_review(
    console: Console, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as crashed:
        crashed.setattr(GateLog, "receipt", lambda *_: None)  # died before its append
        project_id, review = _reviewed(server)
    assert review["logEntry"] is None
    console.sign_in()
    console.open(f"#/p/{project_id}/r/{review['id']}")
    expect(console.page.locator("#log-entry")).to_have_text("Not in this deployment's log yet.")
