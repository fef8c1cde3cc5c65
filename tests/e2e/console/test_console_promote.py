"""The promote execution in the console's execution graph, beside the receipt run: an owner
promotes in the browser (real before-promote checks behind it) and sees each promote state
done; on AWS the same graph links the PromoteRun execution's Step Functions console page."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.integration.api.support import PASSING
from tests.support.console import Console
from tests.support.live import Project, Server, new_lane, new_project

LINK = "Open this promote execution in the Step Functions console"
PROMOTE_STATES = ("acquire", "start-run", "run", "verify", "write", "release")


def _promoted_in_the_browser(console: Console, server: Server) -> tuple[Project, str]:
    """A review approved over the API, then promoted by clicking; (project, review id)."""
    project = new_project(server, True)
    commit, review = new_lane(project).reviewed(PASSING)
    path = f"/projects/{project.id}/reviews/{review['id']}"
    server.owner.ok("POST", f"{path}/approve", {"commit": commit})
    console.sign_in()
    console.open(f"#/p/{project.id}/r/{review['id']}")
    page = console.page
    expect(page.locator("#promote-execution")).to_have_count(0)  # no promote yet
    page.get_by_role("button", name="Promote to canonical main").click()
    expect(page.locator("#promote-result")).to_contain_text(
        f"Promoted: canonical moved from {project.initial[:12]} to {commit[:12]}", timeout=90_000
    )
    return project, str(review["id"])


def _promote_graph_is_done(page: Page) -> None:
    figure = page.locator("#promote-execution")
    expect(figure).to_have_attribute("data-state", "done")
    graph = figure.locator("svg.graph")
    for key in PROMOTE_STATES:
        expect(graph.locator(f"g[data-key=promote-{key}]")).to_have_attribute("data-status", "done")
    expect(graph.locator("g[data-key=promote-settle]")).to_have_count(0)
    expect(graph.locator("g[data-key=promote-run] text.name")).to_have_text("Before-promote run")
    # Beside it, the receipt run: the before-promote run's own graph, finalized.
    run = page.locator("#run-execution svg.graph")
    expect(run.locator("g[data-key=finalize]")).to_have_attribute("data-status", "done")


def test_a_promote_shows_its_execution_graph_beside_the_receipt_run(
    console: Console, server: Server
) -> None:
    _project, _review = _promoted_in_the_browser(console, server)
    page = console.page
    _promote_graph_is_done(page)
    expect(page.locator("#promote-execution")).to_contain_text("local supervisor")
    expect(page.get_by_role("link", name=LINK)).to_have_count(0)
    console.screenshot("review-promote-graph")


def test_on_aws_the_promote_graph_links_its_step_functions_execution(
    console: Console, server: Server
) -> None:
    """The history as the AWS service answers it: this server's real events, with the
    ARNs and console links the Step Functions orchestrator adds (the browser is given
    them; `inspection` builds them, tested on moto)."""
    project, review_id = _promoted_in_the_browser(console, server)
    path = f"/projects/{project.id}/reviews/{review_id}/history"
    history: dict[str, Any] = server.owner.ok("GET", path)
    promotion_id = history["promote"]["promotionId"]
    arn = f"arn:aws:states:eu-west-1:123456789012:execution:PromoteRun:{promotion_id}"
    link = (
        "https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1"
        f"#/v2/executions/details/{arn}"
    )
    history["source"] = "step-functions"
    history["promote"] |= {"executionArn": arn, "consoleUrl": link}
    console.page.route(f"{server.url}{path}", lambda route: route.fulfill(json=history))
    console.open(f"#/p/{project.id}/r/{review_id}")
    page = console.page
    expect(page.get_by_role("link", name=LINK)).to_have_attribute("href", link)
    _promote_graph_is_done(page)
