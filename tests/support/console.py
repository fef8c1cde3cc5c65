"""The owner console in Debian's Chromium, driven by Playwright, against the API tests' live
server (waitress in-thread, SQLite, disk git, real bubblewrap and podman checks)."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support.live import Project, Server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 800}
TIMEOUT_MS = 90_000
TOKEN_KEY = "forkhorse.token"  # the sessionStorage key, not a secret

# Decodes a PNG with the browser itself and reports how varied its pixels are.
_PIXEL_STATS = """async (data) => {
  const image = new Image();
  image.src = 'data:image/png;base64,' + data;
  await image.decode();
  const canvas = document.createElement('canvas');
  canvas.width = image.width; canvas.height = image.height;
  const context = canvas.getContext('2d');
  context.drawImage(image, 0, 0);
  const pixels = context.getImageData(0, 0, image.width, image.height).data;
  const counts = new Map();
  for (let i = 0; i < pixels.length; i += 4) {
    const key = (pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2];
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const total = pixels.length / 4;
  return {width: image.width, height: image.height, colours: counts.size,
          dominant: Math.max(...counts.values()) / total};
}"""


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is required: apt-get install chromium")
    with sync_playwright() as running:
        yield running


@dataclass
class Console:
    """One signed-out browser tab on the console, with a fresh Chromium profile."""

    server: Server
    context: BrowserContext
    page: Page
    errors: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def open(self, route: str = "#/") -> None:
        """Load a page of the console afresh, even when the tab is already on it."""
        target = f"{self.url}/{route}"
        if self.page.url == target:
            self.page.reload()
        else:
            self.page.evaluate("document.body.dataset.ready = 'false'")
            self.page.goto(target)
        self.wait_ready()

    def wait_ready(self) -> None:
        try:
            self.page.wait_for_selector("body[data-ready=true]", timeout=TIMEOUT_MS)
        except PlaywrightTimeout:
            seen = self.page.evaluate("document.body.innerText.slice(0, 2000)")
            pytest.fail(f"{self.page.url} never became ready; page errors {self.errors}; {seen!r}")

    def sign_in(self) -> None:
        """Through the form, as an owner would."""
        self.page.goto(self.url + "/")
        self.page.get_by_label("Owner token").fill(self.server.owner_token)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.get_by_role("heading", name="Projects", level=1).wait_for()
        self.wait_ready()

    def screenshot(self, name: str) -> Path:
        """A full-page screenshot under test-artifacts/console/, proven not blank."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        stats = self.pixel_stats(path)
        assert stats["colours"] >= 16, (name, stats)
        assert stats["dominant"] < 0.95, (name, stats)
        return path

    def pixel_stats(self, path: Path) -> dict[str, Any]:
        blank = self.context.new_page()
        try:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            stats: dict[str, Any] = blank.evaluate(_PIXEL_STATS, data)
        finally:
            blank.close()
        return stats

    def fits_width(self, width: int) -> None:
        scroll = self.page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"the page is {scroll} px wide at a {width} px viewport"


@pytest.fixture
def console(
    playwright: Playwright,
    server: Server,
    tmp_path: Path,
) -> Iterator[Console]:
    profile = tmp_path / "chromium-profile"
    context = playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=CHROMIUM,
        args=CHROMIUM_ARGS,
        headless=True,
        viewport=DESKTOP,
        permissions=["clipboard-read", "clipboard-write"],
    )
    context.set_default_timeout(TIMEOUT_MS)
    page = context.pages[0] if context.pages else context.new_page()
    console = Console(server, context, page)
    page.on("pageerror", lambda error: console.errors.append(str(error)))
    yield console
    context.close()
    shutil.rmtree(profile, ignore_errors=True)
    assert console.errors == [], console.errors


def project_from_console(server: Server, project_id: str) -> Project:
    """A project the console created, given its initial import like the API tests' projects."""
    state = server.owner.state(project_id)
    base = server.worktree()
    initial = base.commit({"README.md": "hello from the console test\n"}, "initial import")
    base.push(state["project"]["cloneUrl"], server.owner_token)
    return Project(server, project_id, state["project"]["cloneUrl"], base, initial)


def write_artifact(name: str, value: Any) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
