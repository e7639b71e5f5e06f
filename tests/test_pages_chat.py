"""The chat page in a real browser: Playwright drives Debian's headless Chromium against a
real `hearth serve` (the resident companion) whose phone is paired with a scripted,
hostile home. A request streams and completes; a confirmation shows the exact arguments
as text and its taint sources, and is denied, then approved; the planner's answer full of
`<script>`, `<img onerror>` and a Markdown link is shown literally. After sign-in the page
logs no console error, no failed request and no request to another origin, and fits a
360 px window; screenshots at 360 and 1280 px go to docs/screenshots/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, Page, expect

from .conftest import Processes
from .hostile.harness import Bench, start_bench
from .hostile.script import Round, Script
from .hostile.suites import WEB
from .nodes import BIN, wait_ready
from .pages import CHROMIUM, CSP, MISSING, Watch, screenshots, signed_in

pytestmark = pytest.mark.timeout(300)

if not CHROMIUM.exists():
    pytest.skip(MISSING, allow_module_level=True)

HOSTILE_BODY = "<img src=x onerror=alert(2)> see [this](http://evil.example/x)"
HOSTILE_ANSWER = (
    "<script>alert(1)</script> Sent. <img src=x onerror=alert(3)> [more](http://evil.example)"
)
SEND = {"id": "s1", "tool": "message_send", "arguments": {"to": "alice", "body": HOSTILE_BODY}}


@dataclass
class Chat:
    url: str
    token: str
    bench: Bench

    def script(self, script: Script) -> None:
        self.bench.script.write_text(script.model_dump_json())


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    processes = Processes()
    root = tmp_path_factory.mktemp("chat")
    try:
        bench = start_bench(processes, root)
        ready = root / "companion-ready.json"
        companion = processes.spawn(
            str(BIN / "hearth"), "serve", "--api-port", "0", "--ready-file", str(ready),
            "--home", str(bench.phone),
        )  # fmt: skip
        url = wait_ready(companion, ready)["api"]
        token = (bench.phone / "api.token").read_text().strip()
        yield Chat(url, token, bench)
    finally:
        processes.cleanup()


@pytest.fixture
def page(browser: Browser, chat: Chat) -> Iterator[tuple[Page, Watch]]:
    with signed_in(browser, chat.url, chat.token) as signed:
        yield signed


def send(page: Page, text: str) -> None:
    box = page.get_by_role("textbox", name="Message", exact=True)
    box.fill(text)
    box.press("Enter")


def outbox(chat: Chat) -> list[str]:
    return sorted(p.read_text() for p in (chat.bench.phone / "data" / "outbox").glob("*.json"))


def test_the_page_is_served_at_the_api_root_under_a_strict_csp(chat: Chat, browser) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        first = page.goto(chat.url + "/")
        assert first is not None and first.headers["content-security-policy"] == CSP
        expect(page.get_by_label("Access token")).to_be_visible()
        page.get_by_label("Access token").fill(chat.token)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("textbox", name="Message", exact=True)).to_be_visible()
        expect(page.get_by_role("button", name="Send")).to_be_visible()
        assert page.get_by_role("log").count() == 1
    finally:
        context.close()


def test_a_confirmation_is_denied_then_approved_and_hostile_text_stays_text(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    page_, watch = page
    page_.get_by_label("Route").select_option("remote")
    # the planner read a web page first: its literal recipient is tainted by it
    tainted = Round.model_validate({"steps": [SEND], "untrusted_inputs": [WEB]})
    chat.script(Script(rounds=[tainted], answer=HOSTILE_ANSWER))
    before = outbox(chat)

    # denied: the dialog shows the exact arguments as text, the step ends refused
    send(page_, "send alice a hi")
    turn = page_.get_by_role("log").get_by_role("article").last
    expect(turn).to_have_attribute("aria-busy", "true")
    dialog = page_.get_by_role("dialog", name="Confirm message_send")
    expect(dialog).to_be_visible()
    shown = json.loads(dialog.locator("pre").inner_text())
    assert shown == SEND["arguments"]
    sources = dialog.get_by_role("list")
    expect(sources).to_be_visible()
    assert "evil.example" in sources.inner_text(), sources.inner_text()
    dialog.get_by_role("button", name="Deny").click()
    expect(turn).to_have_attribute("aria-busy", "false")
    expect(turn.get_by_role("listitem")).to_contain_text("message_send")
    expect(turn.get_by_role("listitem")).to_contain_text("refused")
    assert outbox(chat) == before

    # approved: the step runs and the message leaves
    send(page_, "send alice a hi, really")
    turn = page_.get_by_role("log").get_by_role("article").last
    dialog = page_.get_by_role("dialog", name="Confirm message_send")
    expect(dialog).to_be_visible()
    assert json.loads(dialog.locator("pre").inner_text()) == SEND["arguments"]
    dialog.get_by_role("button", name="Approve").click()
    expect(turn).to_have_attribute("aria-busy", "false")
    expect(turn.get_by_role("listitem")).to_contain_text("ok")
    assert len(outbox(chat)) == len(before) + 1

    # the route as text and data, and the hostile answer literally
    expect(turn.locator(".route strong")).to_have_text("home")
    expect(turn).to_have_attribute("data-route", "home")
    expect(turn.locator(".answer")).to_have_text(HOSTILE_ANSWER)
    assert page_.get_by_role("log").locator("img, script, a").count() == 0
    assert page_.locator(".turn-error").count() == 0  # every stream ended with its answer

    # both asks went to one conversation; a new one starts empty; the old one reopens
    conversations = page_.locator("#conversations li")
    expect(conversations).to_have_count(1)
    page_.get_by_role("button", name="New conversation").click()
    expect(page_.get_by_role("log").get_by_role("article")).to_have_count(0)
    conversations.get_by_role("button").click()
    reopened = page_.get_by_role("log").get_by_role("article")
    expect(reopened).to_have_count(2)
    expect(reopened.last.locator(".answer")).to_have_text(HOSTILE_ANSWER)

    # the audit log, verified
    page_.get_by_text("Audit log").click()
    page_.get_by_role("button", name="Verify").click()
    expect(page_.locator("#audit-state")).to_contain_text("verified: the chain is intact")
    expect(
        page_.get_by_role("list", name="Audit records").get_by_role("listitem")
    ).not_to_have_count(0)

    screenshots(page_, "chat")
    assert watch.problems == []


def test_a_confirmation_shows_bidi_overrides_and_invisible_characters_escaped(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    """A hostile planner's right-to-left override or zero-width space must not reorder or
    hide what the dialog shows: they appear as `\\uXXXX`, as the CLI shows them, and the
    text is still the arguments' exact JSON."""
    page_, _ = page
    page_.get_by_label("Route").select_option("remote")
    arguments = {"to": "alice\u202egnp.exe", "body": "hi\u200b\u2028there"}
    step = {"id": "s1", "tool": "message_send", "arguments": arguments}
    chat.script(Script(rounds=[Round.model_validate({"steps": [step]})], answer="ok"))
    send(page_, "send alice a hi")
    turn = page_.get_by_role("log").get_by_role("article").last
    dialog = page_.get_by_role("dialog", name="Confirm message_send")
    expect(dialog).to_be_visible()
    shown = dialog.locator("pre").inner_text()
    assert not {"\u202e", "\u200b", "\u2028"} & set(shown), shown
    assert "\\u202e" in shown and "\\u200b" in shown
    assert json.loads(shown) == arguments
    dialog.get_by_role("button", name="Deny").click()
    expect(turn).to_have_attribute("aria-busy", "false")


def test_the_session_cookie_alone_opens_no_api(page: tuple[Page, Watch], chat: Chat) -> None:
    """Cookies reach every port of 127.0.0.1, so a server on another port could harvest the
    session cookie: with it alone (here: the tab's own cookie jar, without the page's key)
    the API is 401, and a new tab (no key in its sessionStorage) is asked to sign in."""
    page_, _ = page
    harvested = page_.context.request.get(chat.url + "/api/status")
    assert harvested.status == 401
    other = page_.context.new_page()
    try:
        other.goto(chat.url + "/")
        expect(other.get_by_label("Access token")).to_be_visible()
    finally:
        other.close()
    expect(page_.locator("#home")).to_contain_text("Home")
