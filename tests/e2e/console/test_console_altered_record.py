"""The console with an attached record whose digest is right but whose shape the receipt
schema refuses (a quick check without `runtime`): the review page still draws, shows the
receipt endpoint's 409 under the receipt and the gate's `altered` reason, and Approve is
refused with it (issue 30, item 5). A real quick check in bubblewrap; only the record the
runner publishes is reshaped, as an altered store would hold it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from forkhorse import records
from forkhorse.domain.receipts import ReceiptRecord
from forkhorse.ports.store import RecordStore
from playwright.sync_api import expect

from tests.integration.api.support import checks_files
from tests.support.console import Console
from tests.support.live import Server, new_lane, new_project

REFUSED = "The attached record is not a valid receipt record."


def _without_quick_runtime(store: RecordStore, record: ReceiptRecord, now: datetime) -> str:
    wire: dict[str, Any] = record.model_dump(mode="json")
    for check in wire["checks"]:
        if check["tier"] == "quick":
            del check["runtime"]
    return records.put_json(store, wire, now)


def test_a_schema_refused_record_reads_as_altered_in_the_console(
    console: Console, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = new_project(server, True)
    lane = new_lane(project)
    monkeypatch.setattr(records, "put_record", _without_quick_runtime)
    commit = lane.push(checks_files(quick=True))
    review = lane.request_review(commit)
    server.owner.wait_receipt(project.id, review["id"])
    base = f"/projects/{project.id}/reviews/{review['id']}"
    status, body = server.owner.call("GET", f"{base}/receipt")
    assert (status, body["error"]) == (409, REFUSED)
    status, refused = server.owner.call("POST", f"{base}/approve", {"commit": commit})
    assert (status, refused["reasons"]) == (409, [f"altered: {REFUSED}"])

    console.sign_in()
    console.open(f"#/p/{project.id}/r/{review['id']}")
    page = console.page
    expect(page.locator("#receipt [role=alert]")).to_contain_text(f"Record refused: {REFUSED}")
    reasons = page.locator("#approve-gate li")
    expect(reasons).to_have_text([f"altered {REFUSED}"])
    expect(reasons.first.locator(".code-altered")).to_have_text("altered")
    page.get_by_role("button", name=f"Approve commit {commit[:12]}").click()
    alert = page.locator("#approve-result [role=alert]")
    expect(alert).to_contain_text(
        "Approve refused: The receipt does not satisfy the required gate."
    )
    expect(alert.locator("li")).to_have_text([f"altered {REFUSED}"])
