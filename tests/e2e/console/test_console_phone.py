"""The console on a 375 px wide phone (issue 29): the projects, project and review pages
scroll only downwards, with long unbroken names, titles, messages and log lines in them."""

from __future__ import annotations

from playwright.sync_api import ViewportSize

from tests.integration.api.support import checks_files
from tests.support.console import PHONE, Console
from tests.support.live import Project, Server, new_lane

UNBROKEN = "w" * 180  # no space, dash or slash a browser could break a line at
LONG_QUICK = (
    f"def check(ctx):\n    return {{'ok': False, 'message': 'Quick check failed: {UNBROKEN}'}}\n"
)


# The innermost elements reaching past the viewport's right edge: what to fix.
_OVERFLOWING = """(width) => [...document.querySelectorAll('body *')]
  .filter(e => !e.closest('thead') && e.getBoundingClientRect().right > width + 0.5)
  .filter(e => ![...e.children].some(c => c.getBoundingClientRect().right > width + 0.5))
  .slice(0, 8)
  .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
       (typeof e.className === 'string' && e.className ? '.' + e.className : '') +
       ' ' + Math.round(e.getBoundingClientRect().right) + 'px: ' +
       (e.textContent || '').slice(0, 60))"""


def _scroll_width(console: Console) -> int:
    width: int = console.page.evaluate("document.scrollingElement.scrollWidth")
    return width


def test_the_project_and_review_pages_fit_a_375_px_phone(console: Console, server: Server) -> None:
    body = {"name": f"project-{UNBROKEN[:90]}", "requireReceipt": True}
    created = server.owner.ok("POST", "/projects", body, expect=201)["project"]
    base = server.worktree()
    initial = base.commit({"README.md": "hello\n"}, "initial import")
    base.push(created["cloneUrl"], server.owner_token)
    project = Project(server, created["id"], created["cloneUrl"], base, initial)
    lane = new_lane(project, f"agent{UNBROKEN[:50]}")
    files = checks_files(f"echo {UNBROKEN}; exit 1")
    files[".forkhorse/quick/ok.py"] = LONG_QUICK
    commit = lane.push(files, f"a change named {UNBROKEN}")
    review = lane.request_review(commit)
    server.owner.wait_receipt(project.id, review["id"])
    project.packet(f"a packet titled {UNBROKEN}")

    console.sign_in()
    console.page.set_viewport_size(ViewportSize(width=PHONE["width"], height=PHONE["height"]))
    pages = {
        "projects": "#/",
        "project": f"#/p/{project.id}",
        "review": f"#/p/{project.id}/r/{review['id']}",
    }
    for name, route in pages.items():
        console.open(route)
        console.page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        console.page.wait_for_timeout(500)  # opened logs load
        width = _scroll_width(console)
        console.screenshot(f"phone-{name}")
        overflowing = console.page.evaluate(_OVERFLOWING, PHONE["width"])
        assert width <= PHONE["width"], (name, width, overflowing)
