"""The owner console in a real browser, with real checks behind it.

An owner signs in, creates a project, flips its receipt mode with the keyboard, watches a
review go from running to passed, approves and promotes, and finds the ledger entry; a
before-promote run that fails shows the exact 409; a failed check's bounded logs show
where they were cut; a skipped full check reads as skipped.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from forkhorse.domain.limits import PAGE
from playwright.sync_api import expect

from tests.integration.api.support import QUICK_OK, checks_files
from tests.support.console import DESKTOP, PHONE, TOKEN_KEY, Console, project_from_console
from tests.support.live import Project, Server, new_lane, new_project
from tests.support.store import promote_done

SLOW_PASSING = checks_files("sleep 3")
QUICK_FAILS = "def check(ctx):\n    return {'ok': False, 'message': 'Quick check failed.'}\n"
NOISY_FAILURE = (
    "echo start-of-log; yes filler-line | head -c 70000; echo end-of-log; echo oops >&2; exit 3"
)


def _project_id(console: Console) -> str:
    match = re.search(r"#/p/([^/]+)$", console.page.url)
    assert match, console.page.url
    return match.group(1)


def _flip_with_keyboard(console: Console, expect_text: str) -> None:
    page = console.page
    page.get_by_role("button", name="Copy the clone URL").focus()
    page.keyboard.press("Tab")
    switch = page.get_by_role("switch", name="Require receipts before approve and promote")
    expect(switch).to_be_focused()
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", "the focused switch has no visible focus ring"
    page.keyboard.press("Space")
    expect(page.locator("#mode-status")).to_have_text(expect_text)
    expect(switch).to_be_focused()


def _review_row(console: Console, review_id: str) -> str:
    return f"#reviews tr:has(a[href$='/r/{review_id}'])"


def _shots(console: Console, name: str) -> None:
    console.screenshot(f"{name}-desktop")
    console.page.set_viewport_size(PHONE)
    console.page.wait_for_timeout(200)
    console.fits_width(PHONE["width"])
    console.screenshot(f"{name}-375px")
    console.page.set_viewport_size(DESKTOP)


def test_sign_in_create_flip_watch_a_review_pass_approve_promote_and_see_the_ledger(
    console: Console, server: Server
) -> None:
    page = console.page
    page.goto(console.url + "/")
    page.get_by_label("Owner token").fill("fh_not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("The token is unknown or revoked.")
    console.sign_in()
    # The token lives in this tab's sessionStorage only, never in a cookie.
    assert page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')") == server.owner_token
    assert page.evaluate("document.cookie") == ""
    assert console.context.cookies() == []

    page.get_by_label("Name").fill("console-flow")
    expect(page.get_by_label("Require receipts (required mode)")).to_be_checked()
    page.get_by_role("button", name="Create project").click()
    expect(page.get_by_role("heading", name="console-flow", level=1)).to_be_visible()
    project = project_from_console(server, _project_id(console))
    expect(page.locator("#mode-now")).to_contain_text("Mode: required.")

    _flip_with_keyboard(console, "Saved: receipts are now advisory.")
    assert server.owner.state(project.id)["project"]["settings"] == {"requireReceipt": False}
    expect(page.locator("#mode-now")).to_contain_text("Mode: advisory.")
    _flip_with_keyboard(console, "Saved: receipts are now required.")
    assert server.owner.state(project.id)["project"]["settings"] == {"requireReceipt": True}

    lane = new_lane(project)
    commit = lane.push(SLOW_PASSING)
    review = lane.request_review(commit)
    console.open(f"#/p/{project.id}")
    row = page.locator(_review_row(console, review["id"]))
    expect(row.locator(".badge").first).to_have_text("◌ Running")
    # No reload: the badge follows the run while the page polls /state.
    expect(row.locator(".badge").first).to_have_text("✓ Passed", timeout=90_000)
    expect(row).to_contain_text("2 of 2 passed")
    expect(page.locator("#forks")).to_contain_text(commit[:12])
    expect(page.locator("#packets")).to_contain_text(f"Claimed by {lane.agent_id}")
    _shots(console, "project")

    row.get_by_role("link").click()
    console.wait_ready()
    _check_the_passed_review(console, server, project, review["id"], commit)
    _shots(console, "review")

    page.get_by_role("button", name=f"Approve commit {commit[:12]}").click()
    expect(page.locator("#approve-result")).to_contain_text(f"Approved commit {commit[:12]}")
    expect(page.locator("#promote-gate")).to_contain_text("Promote will rerun every check")
    page.get_by_role("button", name="Promote to canonical main").click()
    expect(page.locator("#promote-result")).to_contain_text(
        f"Promoted: canonical moved from {project.initial[:12]} to {commit[:12]}", timeout=90_000
    )
    expect(page.locator("#promote-done")).to_be_visible()

    page.get_by_role("link", name="← console-flow").click()
    console.wait_ready()
    ledger = page.locator("#ledger tbody tr")
    expect(ledger).to_have_count(1)
    expect(ledger).to_contain_text(commit[:12])
    expect(ledger).to_contain_text(project.initial[:12])
    digest = server.owner.state(project.id)["ledger"][0]["digest"]
    expect(ledger.locator("code").nth(2)).to_have_attribute("title", digest)
    console.screenshot("project-promoted-desktop")


def _check_the_passed_review(
    console: Console, server: Server, project: Project, review_id: str, commit: str
) -> None:
    page = console.page
    expect(page.locator("#review-commit")).to_have_text(commit)
    expect(page.locator("#receipt-status")).to_have_text("✓ Passed")
    rows = page.locator("#checks tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("quick")
    expect(rows.nth(0)).to_contain_text("dynamic-worker")
    expect(rows.nth(1)).to_contain_text("full-0")
    expect(rows.nth(1)).to_contain_text("container")
    expect(rows.nth(1)).to_contain_text("Exited with code 0.")
    digest = server.owner.review(project.id, review_id)["receipt"]["digest"]
    expect(page.locator("#digest")).to_have_text(digest)
    page.get_by_role("button", name="Copy the digest").click()
    assert page.evaluate("navigator.clipboard.readText()") == digest
    # Signed evidence: "signed" with the key id beside the digest, and the envelope to download.
    envelope = server.owner.ok("GET", f"/projects/{project.id}/reviews/{review_id}/attestation")
    keyid = envelope["signatures"][0]["keyid"]
    expect(page.locator("#signature")).to_have_text(f"✓ Signed with key {keyid[:12]}")
    expect(page.locator("#signing-key")).to_have_attribute("title", keyid)
    with page.expect_download() as downloaded:
        page.locator("#download-attestation").click()
    assert json.loads(Path(downloaded.value.path()).read_text()) == envelope
    # The gate lists its reason instead of "waiting".
    expect(page.locator("#approve-gate")).to_contain_text("The gate accepts approval")
    expect(page.locator("#promote-gate")).to_contain_text(
        "consent The owner has not approved this review."
    )
    graph = page.locator("svg.graph")
    statuses = {
        key: graph.locator(f"g[data-key={key}]").get_attribute("data-status")
        for key in ("prepare", "quick-0", "gate", "full-0", "finalize")
    }
    assert statuses == {
        "prepare": "done",
        "quick-0": "passed",
        "gate": "open",
        "full-0": "passed",
        "finalize": "done",
    }
    expect(graph.locator("g[data-key=full-0] text.detail")).to_contain_text(
        re.compile(r"full check · Passed · \d")
    )
    expect(page.locator("#graph")).to_contain_text("local supervisor")
    expect(page.locator("#flow")).to_contain_text("No Flow-Next review receipts")


def test_a_failed_before_promote_run_shows_the_409_and_the_failed_logs_are_readable(
    console: Console, server: Server
) -> None:
    project = new_project(server, False)
    lane = new_lane(project)
    files = checks_files(NOISY_FAILURE)
    commit = lane.push(files)
    review = lane.request_review(commit)
    server.owner.wait_receipt(project.id, review["id"])
    console.sign_in()
    console.open(f"#/p/{project.id}/r/{review['id']}")
    page = console.page
    expect(page.locator("#receipt-status")).to_have_text("✗ Failed")
    expect(page.locator("#checks tbody tr").nth(1)).to_contain_text("Exited with code 3.")

    logs = page.locator("details[data-check=full-0]")
    logs.locator("summary").click()
    stdout = logs.locator("figure").first
    expect(stdout).to_have_attribute("data-truncated", "true")
    expect(stdout.locator("figcaption")).to_contain_text("dropped from the middle")
    expect(stdout.locator("pre")).to_contain_text("start-of-log")
    expect(stdout.locator("pre")).to_contain_text("end-of-log")
    expect(stdout.locator(".cut")).to_contain_text("dropped here, original bytes 16,384")
    expect(logs.locator("figure").nth(1).locator("pre")).to_have_text("oops\n")
    console.screenshot("review-failed-logs-desktop")

    # Advisory: the failure is visible but does not gate approval.
    expect(page.locator("#gate-mode")).to_contain_text("Mode: advisory.")
    page.get_by_role("button", name=f"Approve commit {commit[:12]}").click()
    expect(page.locator("#approve-result")).to_contain_text("(advisory mode)")

    console.open(f"#/p/{project.id}")
    _flip_with_keyboard(console, "Saved: receipts are now required.")
    console.open(f"#/p/{project.id}/r/{review['id']}")
    expect(page.locator("#gate-mode")).to_contain_text("Mode: required.")
    page.get_by_role("button", name="Promote to canonical main").click()
    refusal = page.locator("#promote-result [role=alert]")
    expect(refusal).to_have_text("Promote refused: Checks failed before promote.", timeout=90_000)
    expect(page.locator("#receipt")).to_contain_text("before-promote")
    expect(page.locator("#receipt-status")).to_have_text("✗ Failed")
    assert server.owner.state(project.id)["ledger"] == []
    console.open(f"#/p/{project.id}")
    expect(page.locator("#ledger")).to_contain_text("Nothing promoted yet.")


def test_a_failed_quick_check_skips_full_checks_and_the_gate_lists_each_reason(
    console: Console, server: Server
) -> None:
    project = new_project(server, True)
    lane = new_lane(project)
    files = checks_files("true")
    files[".forkhorse/quick/ok.py"] = QUICK_FAILS
    commit = lane.push(files)
    review = lane.request_review(commit)
    server.owner.wait_receipt(project.id, review["id"])
    console.sign_in()
    console.open(f"#/p/{project.id}/r/{review['id']}")
    page = console.page
    full = page.locator("#checks tbody tr").nth(1)
    expect(full).to_contain_text("⤼ Skipped")
    expect(full).to_contain_text("Skipped: a quick check failed.")
    graph = page.locator("svg.graph")
    expect(graph.locator("g[data-key=gate]")).to_have_attribute("data-status", "closed")
    expect(graph.locator("g[data-key=full-0]")).to_have_attribute("data-status", "skipped")
    expect(graph.locator("g[data-key=quick-0] text.name")).to_have_text("quick")
    reasons = page.locator("#approve-gate li")
    expect(reasons.first).to_contain_text("failed")
    refused = server.owner.call(
        "POST", f"/projects/{project.id}/reviews/{review['id']}/approve", {"commit": commit}
    )[1]["reasons"]
    expect(reasons).to_have_text([reason.replace(": ", " ", 1) for reason in refused])
    page.get_by_role("button", name=f"Approve commit {commit[:12]}").click()
    alert = page.locator("#approve-result [role=alert]")
    expect(alert).to_contain_text(
        "Approve refused: The receipt does not satisfy the required gate."
    )
    expect(alert.locator("li")).to_have_count(len(refused))
    assert QUICK_OK not in files.values()


def _sfn_event(number: int, kind: str, **details: Any) -> dict[str, Any]:
    stamp = f"2026-01-02T03:04:{number:02d}.000000+00:00"
    return {
        "id": number,
        "previousEventId": number - 1,
        "timestamp": stamp,
        "type": kind,
        **details,
    }


def _sfn_history(quick: str, full: str) -> list[dict[str, Any]]:
    """GetExecutionHistory of a ReceiptRun execution as Step Functions writes it."""
    prepared = json.dumps({"prepared": {"quick": [{"name": quick}], "full": [{"name": full}]}})
    gate = json.dumps({"quickGate": {"closed": False}})
    steps: list[tuple[str, dict[str, Any]]] = [
        ("ExecutionStarted", {}),
        ("TaskStateEntered", {"stateEnteredEventDetails": {"name": "Prepare", "input": "{}"}}),
        ("TaskStateExited", {"stateExitedEventDetails": {"name": "Prepare", "output": prepared}}),
        ("MapStateEntered", {"stateEnteredEventDetails": {"name": "QuickChecks", "input": "{}"}}),
        (
            "MapIterationStarted",
            {"mapIterationStartedEventDetails": {"name": "QuickChecks", "index": 0}},
        ),
        (
            "MapIterationSucceeded",
            {"mapIterationSucceededEventDetails": {"name": "QuickChecks", "index": 0}},
        ),
        ("ChoiceStateEntered", {"stateEnteredEventDetails": {"name": "QuickGate", "input": "{}"}}),
        ("ChoiceStateExited", {"stateExitedEventDetails": {"name": "QuickGate", "output": gate}}),
        (
            "MapIterationStarted",
            {"mapIterationStartedEventDetails": {"name": "FullChecks", "index": 0}},
        ),
        ("TaskStateEntered", {"stateEnteredEventDetails": {"name": "FullPoll", "input": "{}"}}),
    ]
    return [_sfn_event(number, kind, **details) for number, (kind, details) in enumerate(steps, 1)]


def test_on_aws_the_graph_draws_step_functions_history_and_links_its_console(
    console: Console, server: Server
) -> None:
    project = new_project(server, True)
    lane = new_lane(project)
    commit = lane.push(SLOW_PASSING)
    review = lane.request_review(commit)
    arn = f"arn:aws:states:eu-west-1:123456789012:execution:ReceiptRun:{review['id']}"
    link = f"https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1#/v2/executions/details/{arn}"
    history = {
        "source": "step-functions",
        "executionArn": arn,
        "consoleUrl": link,
        "events": _sfn_history("quick", "full-0"),
    }
    console.page.route(
        f"{server.url}/projects/{project.id}/reviews/{review['id']}/history",
        lambda route: route.fulfill(json=history),
    )
    console.sign_in()
    console.open(f"#/p/{project.id}/r/{review['id']}")
    page = console.page
    expect(
        page.get_by_role("link", name="Open this execution in the Step Functions console")
    ).to_have_attribute("href", link)
    graph = page.locator("svg.graph")
    expect(graph.locator("g[data-key=prepare]")).to_have_attribute("data-status", "done")
    expect(graph.locator("g[data-key=gate]")).to_have_attribute("data-status", "open")
    expect(graph.locator("g[data-key=quick-0] text.detail")).to_contain_text("· 1.00 s")
    expect(graph.locator("g[data-key=finalize]")).to_have_attribute("data-status", "pending")
    server.owner.wait_receipt(project.id, review["id"])


def test_a_replaced_review_leaves_the_reviews_list_and_stays_reachable_under_every_review(
    console: Console, server: Server
) -> None:
    project = new_project(server, False)
    lane = new_lane(project)
    _, first = lane.reviewed({"NOTES.md": "first\n"})
    _, second = lane.reviewed({"NOTES.md": "second\n"})  # same packet, same fork
    console.sign_in()
    console.open(f"#/p/{project.id}")
    page = console.page
    expect(page.locator(_review_row(console, second["id"]))).to_be_visible()
    expect(page.locator(_review_row(console, first["id"]))).to_have_count(0)

    page.get_by_role("button", name="Show every review").click()
    older = page.locator(f"#history tr:has(a[href$='/r/{first['id']}'])")
    expect(older).to_be_visible()
    expect(page.locator("#history tbody tr")).to_have_count(2)
    expect(page.get_by_role("button", name="Show older reviews")).to_be_hidden()
    older.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Review {first['id'][:12]}")


def test_the_ledger_shows_the_newest_promotions_and_pages_through_the_rest(
    console: Console, server: Server
) -> None:
    project = new_project(server, False)
    store, now = server.app.service.context.store, server.app.service.context.clock.now()
    count = PAGE.state_ledger + 5
    for index in range(count):
        at = now + timedelta(seconds=index)
        promote_done(store, project.id, "review-seeded", f"p{index}", f"{index:040x}", at)
    console.sign_in()
    console.open(f"#/p/{project.id}")
    page = console.page
    expect(page.locator("#ledger tbody tr")).to_have_count(PAGE.state_ledger)
    page.get_by_role("button", name="Show the whole ledger").click()
    expect(page.locator("#whole-ledger tbody tr")).to_have_count(PAGE.default_size)
    page.get_by_role("button", name="Show older promotions").click()
    expect(page.locator("#whole-ledger tbody tr")).to_have_count(count)
    expect(page.get_by_role("button", name="Show older promotions")).to_be_hidden()
    oldest = page.locator("#whole-ledger tbody tr").last
    expect(oldest).to_contain_text(f"{0:040x}"[:12])
