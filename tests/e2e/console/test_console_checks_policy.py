"""The protected-checks policy in the console: the owner turns it on from the project page,
an agent replaces the project's quick check with one that always passes, and the review page
shows the checks diff against canonical, refuses approval with checks-changed, and lets the
owner accept exactly that change."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.integration.api.support import QUICK_OK
from tests.support.console import Console
from tests.support.live import Server, new_guarded_project, new_lane

MODULE = ".forkhorse/quick/ok.py"


def test_the_policy_toggle_and_the_checks_diff_on_the_review_page(
    console: Console, server: Server
) -> None:
    project = new_guarded_project(server, protect_checks=False)
    console.sign_in()
    console.open(f"#/p/{project.id}")
    page = console.page
    switch = page.get_by_role("switch", name="Protect canonical's checks from removal or change")
    expect(switch).not_to_be_checked()
    expect(page.locator("#policy-now")).to_contain_text("Checks are not protected.")
    switch.click()
    expect(page.locator("#policy-status")).to_have_text(
        "Saved: canonical's checks are now protected."
    )
    expect(switch).to_be_checked()
    assert server.owner.state(project.id)["project"]["policy"] == {"protectChecks": True}

    commit, review = new_lane(project).reviewed({MODULE: QUICK_OK})
    assert review["receipt"]["status"] == "passed"
    console.open(f"#/p/{project.id}/r/{review['id']}")
    diff = page.locator("#checks-diff")
    expect(diff).to_contain_text("Canonical's checks are protected")
    row = diff.locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("quick")
    expect(row).to_contain_text("changed")
    expect(row).to_contain_text("Needs acceptance")
    # The same declaration on both sides; only the module's digest differs.
    expect(row.locator("pre.declaration")).to_have_count(2)
    modules = row.locator("code")
    expect(modules).to_have_count(2)
    assert modules.nth(0).get_attribute("title") != modules.nth(1).get_attribute("title")
    expect(page.locator("#approve-gate")).to_contain_text(
        "checks-changed Check quick's module changed."
    )
    console.screenshot("review-checks-diff")

    page.get_by_role("button", name="Accept the checks change and approve").click()
    expect(page.locator("#approve-result")).to_contain_text(
        f"Approved commit {commit[:12]} (required mode), accepting the change of quick."
    )
    approval = server.owner.review(project.id, review["id"])["approval"]
    assert [c["check"] for c in approval["acceptedChecksChange"]] == ["quick"]
    expect(page.locator("#accept-approve-button")).to_have_count(0)
