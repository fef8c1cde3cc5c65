"""Flow-Next review receipts on the review page: the verdict, findings by severity split into
introduced and pre-existing, and the fallback states (stale, absent) labelled as the
contract says, with the receipt and its prose always kept."""

from __future__ import annotations

from typing import Any

from forkhorse.flow.ids import finding_id
from playwright.sync_api import expect

from tests.support.console import Console
from tests.support.live import Lane, Server, new_lane, new_project


def _item(source: str, ordinal: int, severity: str, classification: str) -> dict[str, Any]:
    return {
        "id": finding_id(source, ordinal),
        "ordinal": ordinal,
        "severity": severity,
        "confidence": 75,
        "classification": classification,
        "status": "open",
        "title": f"{severity} {classification} finding {ordinal}",
        "body": "Explained.",
        "rIds": [],
        "firstSeenReceiptId": source,
        "lastSeenReceiptId": source,
    }


def _receipt(
    head: str, source: str, items: list[dict[str, Any]], verdict: str, **container: Any
) -> dict[str, Any]:
    findings = {
        "schemaVersion": 1,
        "sourceReceiptId": source,
        "reviewKind": "implementation",
        "backend": "codex",
        "round": 1,
        "headSha": head,
        "items": items,
        **container,
    }
    return {"type": "impl_review", "mode": "codex", "verdict": verdict, "findings": findings}


def _attach(lane: Lane, review_id: str, body: dict[str, Any]) -> None:
    path = f"/projects/{lane.project.id}/reviews/{review_id}/review-receipts"
    lane.agent.ok("POST", path, body, expect=201)


def test_flow_next_receipts_show_verdicts_groups_and_fallback_labels(
    console: Console, server: Server
) -> None:
    project = new_project(server, False)
    lane = new_lane(project)
    commit = lane.push({"notes.txt": "no checks\n"})
    review = lane.request_review(commit)
    first = [
        _item("r1", 1, "P1", "introduced"),
        _item("r1", 2, "P2", "pre_existing"),
    ]
    _attach(lane, review["id"], _receipt(commit, "r1", first, "NEEDS_WORK"))
    carried = [{**finding, "lastSeenReceiptId": "r2", "status": "fixed"} for finding in first]
    second = _receipt(commit, "r2", carried, "SHIP", round=2, supersedesReceiptId="r1")
    _attach(lane, review["id"], second)
    _attach(lane, review["id"], {"type": "impl_review", "mode": "codex", "verdict": "SHIP"})

    console.sign_in()
    console.open(f"#/p/{project.id}/r/{review['id']}")
    cards = console.page.locator("#flow article")
    expect(cards).to_have_count(3)
    stale = cards.filter(has=console.page.locator(".label-stale"))
    current = cards.filter(has=console.page.locator(".label-current"))
    absent = cards.filter(has=console.page.locator(".label-absent"))

    expect(stale).to_contain_text("Verdict: NEEDS_WORK")
    expect(stale.locator(".findings-label")).to_have_text("Stale evidence")
    expect(stale).to_contain_text("superseded by a later generation")
    expect(stale.locator(".stale-findings")).to_contain_text("P1 introduced finding 1")

    expect(current).to_contain_text("Verdict: SHIP")
    expect(current.locator(".findings-label")).to_have_text("Current")
    p1 = current.get_by_role("region", name="Severity P1")
    expect(p1.locator(".split h5")).to_have_text(["Introduced (1)"])
    p2 = current.get_by_role("region", name="Severity P2")
    expect(p2.locator(".split h5")).to_have_text(["Pre-existing (1)"])
    expect(p2).to_contain_text("fixed P2 pre_existing finding 2")

    expect(absent.locator(".findings-label")).to_have_text("No structured findings")
    expect(absent).to_contain_text("use its verdict and prose")
    absent.locator("summary").click()
    expect(absent.locator("pre")).to_contain_text('"verdict": "SHIP"')
    console.screenshot("review-flow-next-desktop")
