"""What the browser tests of the web pages share: Debian's Chromium driven by Playwright
(never a downloaded browser), signing in through the guard's form, and a watch on what a
page must never do once signed in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, Locator, Page, sync_playwright

from .installed import missing

CHROMIUM = Path("/usr/bin/chromium")
MISSING = missing("Debian's chromium (`apt-get install chromium`; .ci/run does it)")
SCREENSHOTS = Path(__file__).parent.parent / "docs" / "screenshots"
CSP = "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield browser
        finally:
            browser.close()


def screenshots(page: Page, name: str, height: int = 900) -> None:
    """`page` fits a phone's 360 px and a desktop's 1280 px without sideways scrolling;
    full-page screenshots of both go to docs/screenshots/`name`-WIDTH.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width in (360, 1280):
        page.set_viewport_size({"width": width, "height": height})
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=SCREENSHOTS / f"{name}-{width}.png", full_page=True)


def clipboard(page: Page) -> str:
    """What the page's Copy buttons left on the clipboard."""
    return str(page.evaluate("navigator.clipboard.readText()"))


def in_view(page: Page, locator: Locator) -> bool:
    """Whether all of `locator`'s box lies inside the window (nothing cut off)."""
    box = locator.bounding_box()
    size = page.viewport_size
    assert box is not None and size is not None
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= size["width"]
        and box["y"] + box["height"] <= size["height"]
    )


@dataclass
class Watch:
    """What a page did wrong once armed: console errors, uncaught exceptions, failed or
    refused requests, requests to another origin, and JavaScript dialogs (`alert()`)."""

    origin: str
    armed: bool = False
    problems: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("console", lambda m: self._note(m.type == "error", f"console: {m.text}"))
        page.on("requestfailed", lambda r: self._note(True, f"failed: {r.url} {r.failure}"))
        page.on("response", lambda r: self._note(r.status >= 400, f"{r.status}: {r.url}"))
        page.on(
            "request",
            lambda r: self._note(not r.url.startswith(self.origin + "/"), f"off-origin: {r.url}"),
        )

    def _note(self, bad: bool, what: str) -> None:
        if self.armed and bad:
            self.problems.append(what)

    def forgive(self, fragment: str) -> None:
        """Drop the problems that mention `fragment` (a request the test aborted itself)."""
        self.problems = [p for p in self.problems if fragment not in p]


@contextmanager
def signed_in(browser: Browser, origin: str, token: str) -> Iterator[tuple[Page, Watch]]:
    """A page of `origin` signed in with `token` through the form, watched from then on;
    no problem may be left when it closes."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"])  # the Copy buttons
    page = context.new_page()
    page.set_default_timeout(30_000)
    watch = Watch(origin)
    watch.attach(page)
    try:
        page.goto(origin + "/")
        page.get_by_label("Access token").fill(token)
        with page.expect_response(lambda r: r.url.endswith("/api/status")):
            page.get_by_role("button", name="Sign in").click()
        watch.armed = True
        yield page, watch
        assert watch.problems == []
    finally:
        context.close()
