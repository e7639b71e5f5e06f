"""The chat page in a real browser: Playwright drives Debian's headless Chromium against a
real `hearth serve` (the resident companion) whose phone is paired with a scripted,
hostile home. A request streams and completes; a confirmation shows the exact arguments
as text and its taint sources, and is denied, then approved; the planner's answer full of
`<script>`, `<img onerror>` and a Markdown link is shown literally. After sign-in the page
logs no console error, no failed request and no request to another origin, and fits a
360 px window; screenshots at 360 and 1280 px go to docs/screenshots/."""

from __future__ import annotations

import glob
import json
import re
import shutil
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from playwright.sync_api import Browser, Page, expect

from hearth.companion.conversations import Conversations
from hearth.companion.results import AskResult
from hearth.protocol.transport.membership import RosterHolder
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.roster import Member, Role

from .conftest import Processes
from .hostile.harness import Bench, start_bench
from .hostile.script import Round, Script
from .hostile.suites import WEB
from .nodes import BIN, wait_ready, wait_until
from .pages import (
    CHROMIUM,
    CSP,
    MISSING,
    SCREENSHOTS,
    Watch,
    clipboard,
    screenshots,
    signed_in,
)

pytestmark = pytest.mark.timeout(300)

if not CHROMIUM.exists():
    pytest.skip(MISSING, allow_module_level=True)

HOSTILE_BODY = "<img src=x onerror=alert(2)> see [this](http://evil.example/x)"
HOSTILE_ANSWER = (
    "<script>alert(1)</script> Sent. <img src=x onerror=alert(3)> [more](http://evil.example)"
)
HOSTILE_SHOWN = (  # as the page shows it: raw HTML as text, the link with its target
    "<script>alert(1)</script> Sent. <img src=x onerror=alert(3)> more (http://evil.example)"
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
        befriend(bench)
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


FRIEND = peer_id_of(Ed25519PrivateKey.from_private_bytes(bytes(range(32))).public_key())


def befriend(bench: Bench) -> None:
    """The home's roster gains a friend's node holding `planner` (never running here),
    and the phone gets that roster."""
    friend = Member(peer_id=FRIEND, name="alice-pc", roles=frozenset({Role.PLANNER}))
    RosterHolder(bench.root / "node").add(friend)
    shutil.copy2(bench.root / "node" / "roster.signed", bench.phone / "roster.signed")


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

    # the route as text and data, and the hostile answer's HTML literally (Markdown
    # renders its link, showing where it goes)
    expect(turn.locator(".route strong")).to_have_text("home")
    expect(turn).to_have_attribute("data-route", "home")
    expect(turn.locator(".answer")).to_have_text(HOSTILE_SHOWN)
    assert page_.get_by_role("log").locator("img, script, iframe").count() == 0
    link = turn.locator(".answer a")
    expect(link).to_have_attribute("href", "http://evil.example")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    assert page_.locator(".turn-error").count() == 0  # every stream ended with its answer

    # both asks went to one conversation; a new one starts empty; the old one reopens
    conversations = page_.locator("#conversations li")
    expect(conversations).to_have_count(1)
    page_.get_by_role("button", name="New conversation").click()
    expect(page_.get_by_role("log").get_by_role("article")).to_have_count(0)
    conversations.get_by_role("button").first.click()
    reopened = page_.get_by_role("log").get_by_role("article")
    expect(reopened).to_have_count(2)
    expect(reopened.last.locator(".answer")).to_have_text(HOSTILE_SHOWN)

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


MARKDOWN = """Your **day** today:

- milk
- bread

| when | what |
|---|---|
| 9:00 | standup |

```python
print("hi")
```

See [the docs](https://docs.example/a) and ![a tracker](https://tracker.example/p.png).
Hidden \u202egnp.exe and zero\u200bwidth."""


def last_turn(page: Page):
    return page.get_by_role("log").get_by_role("article").last


def test_an_answer_in_markdown_is_rendered_safely_with_copy_buttons(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    page_, watch = page
    page_.get_by_label("Route").select_option("remote")
    chat.script(Script(rounds=[], answer=MARKDOWN))
    send(page_, "what is my day like?")
    turn = last_turn(page_)
    expect(turn).to_have_attribute("aria-busy", "false")
    answer = turn.locator(".answer")
    expect(answer.locator("strong")).to_have_text("day")
    expect(answer.locator("ul li")).to_have_count(2)
    expect(answer.locator("table th")).to_have_text(["when", "what"])
    expect(answer.locator("table td").last).to_have_text("standup")
    expect(answer.locator("pre code")).to_have_text('print("hi")')
    # links show their target and open without a referrer; no picture is fetched
    link = answer.get_by_role("link", name="the docs")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(link).to_have_attribute("target", "_blank")
    expect(answer).to_contain_text("the docs (https://docs.example/a)")
    assert answer.locator("img").count() == 0
    expect(answer).to_contain_text("(https://tracker.example/p.png)")
    # bidi overrides and zero widths are shown, not obeyed
    shown = answer.inner_text()
    assert "\u202e" not in shown and "\u200b" not in shown
    assert "\\u202egnp.exe" in shown and "zero\\u200bwidth" in shown
    for width in (360, 1280):
        page_.set_viewport_size({"width": width, "height": 900})
        assert page_.evaluate("document.documentElement.scrollWidth") <= width
        turn.screenshot(path=SCREENSHOTS / f"chat-markdown-{width}.png")
    # Copy code copies the block; Copy copies the answer's Markdown source
    answer.get_by_role("button", name="Copy code").click()
    assert clipboard(page_).rstrip("\n") == 'print("hi")'
    turn.get_by_role("button", name="Copy", exact=True).click()
    assert clipboard(page_) == MARKDOWN
    assert watch.problems == []  # nothing fetched from elsewhere


def heard(chat: Chat) -> list[str]:
    """The frames the hostile home heard from the phone, in order."""
    if not chat.bench.heard.exists():
        return []
    return [json.loads(line)["frame"] for line in chat.bench.heard.read_text().splitlines()]


def test_stop_ends_the_request_and_the_home_node_is_told(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    page_, watch = page
    page_.get_by_label("Route").select_option("remote")
    chat.script(Script(rounds=[], hold_final=True))  # the home never ends this answer
    cancels = heard(chat).count("cancel")
    send(page_, "a long story, please")
    turn = last_turn(page_)
    stop = turn.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(turn.get_by_role("button", name="Regenerate")).to_be_hidden()
    wait_until(lambda: heard(chat)[-1:] == ["plan_request"], "the home has the request")
    stop.click()
    expect(turn).to_have_attribute("aria-busy", "false")
    expect(turn.locator(".turn-stopped")).to_contain_text("Stopped")
    expect(stop).to_be_hidden()
    wait_until(lambda: heard(chat).count("cancel") > cancels, "the home heard the cancel")
    watch.forgive("/api/ask")  # the page aborted that request itself


def test_regenerate_keeps_the_new_answer_beside_the_first(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    page_, _ = page
    page_.get_by_label("Route").select_option("remote")
    chat.script(Script(rounds=[], answer="The first answer."))
    send(page_, "tell me something")
    turn = last_turn(page_)
    expect(turn.locator(".answer")).to_have_text("The first answer.")
    chat.script(Script(rounds=[], answer="Another answer."))
    turn.get_by_role("button", name="Regenerate").click()
    expect(turn.locator(".answer")).to_have_text("Another answer.")
    expect(turn.locator(".siblings")).to_contain_text("answer 2 of 2")
    turn.get_by_role("button", name="Previous answer").click()
    expect(turn.locator(".answer")).to_have_text("The first answer.")
    turn.get_by_role("button", name="Copy", exact=True).click()
    assert clipboard(page_) == "The first answer."
    expect(page_.get_by_role("log").get_by_role("article")).to_have_count(1)


def seed_conversations(chat: Chat, titles: list[str]) -> dict[str, str]:
    """Conversations kept in the phone's real database, oldest first: title → id."""
    kept = Conversations(chat.bench.phone / "conversations.db")
    ids = {}
    for title in titles:
        ids[title] = kept.for_request(None, False)
        result = AskResult(request_id=ids[title], answer="ok")
        kept.append(ids[title], title, result, set())
    return ids


def test_the_conversation_list_shows_the_newest_50_and_finds_renames_and_deletes(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    page_, _ = page
    ids = seed_conversations(chat, [f"errand {n:02}" for n in range(60)] + ["\u202eemoh"])
    page_.get_by_role("button", name="New conversation").click()  # the list is read again
    listed = page_.locator("#conversations li")
    expect(listed).to_have_count(50)
    expect(page_.locator("#conversations-note")).to_contain_text("The newest 50 of")
    # the list scrolls inside its column: Search and the audit log stay within reach
    scrolls = "(e => e.scrollHeight > e.clientHeight)(document.getElementById('conversations'))"
    assert page_.evaluate(scrolls)
    # a name's bidi override is shown, not obeyed
    expect(listed.first.get_by_role("button").first).to_have_text("\\u202eemoh")
    # an old one, not among the 50, is found by the search
    page_.get_by_label("Find a conversation").fill("errand 03")
    expect(listed).to_have_count(1)
    expect(listed.first).to_contain_text("errand 03")
    # renamed
    listed.first.get_by_role("button", name="Rename errand 03").click()
    dialog = page_.get_by_role("dialog", name="Rename conversation")
    dialog.get_by_label("Title").fill("groceries")
    dialog.get_by_role("button", name="Save").click()
    page_.get_by_label("Find a conversation").fill("groceries")
    expect(listed).to_have_count(1)
    detail = Conversations(chat.bench.phone / "conversations.db").detail(ids["errand 03"])
    assert detail.title == "groceries" and len(detail.turns) == 1
    # deleted, after a confirmation that looks destructive
    listed.first.get_by_role("button", name="Delete groceries").click()
    dialog = page_.get_by_role("dialog", name="Delete conversation")
    confirm = dialog.get_by_role("button", name="Delete")
    assert "danger" in (confirm.get_attribute("class") or "")
    confirm.click()
    expect(listed).to_have_count(0)
    with pytest.raises(HearthError):
        Conversations(chat.bench.phone / "conversations.db").detail(ids["errand 03"])
    page_.get_by_label("Find a conversation").fill("")
    screenshots(page_, "chat-conversations", height=800)


def test_the_home_status_is_one_line_and_sign_in_says_where_the_token_is(
    page: tuple[Page, Watch], chat: Chat, browser: Browser
) -> None:
    page_, _ = page
    # the scripted home plans but answers no health request: one line says why, once
    home = page_.locator("#home")
    expect(home).to_have_text(re.compile(r"^Home: unreachable — protocol_error: [^\n]+$"))
    assert home.inner_text().count("unreachable") == 1
    context = browser.new_context()
    try:
        signin = context.new_page()
        signin.goto(chat.url + "/")
        token_file = chat.bench.phone / "api.token"
        expect(signin.locator("#token-help")).to_contain_text(str(token_file))
        expect(signin.locator("#token-help")).to_contain_text(f"cat {token_file}")
    finally:
        context.close()


def test_the_route_reason_is_one_line_with_the_rest_on_demand(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    """The phone here has no model of its own: `auto` escalates to the home and says why
    at length (how to set a model)."""
    page_, _ = page
    page_.set_viewport_size({"width": 360, "height": 640})
    page_.get_by_label("Route").select_option("auto")
    chat.script(Script(rounds=[], answer="Planned at home."))
    send(page_, "hi")
    turn = last_turn(page_)
    expect(turn).to_have_attribute("aria-busy", "false")
    reason = turn.locator(".route .reason")
    expect(reason).to_contain_text("no local model")
    one_line = reason.evaluate(
        "e => e.getBoundingClientRect().height < 2 * parseFloat(getComputedStyle(e).lineHeight)"
    )
    assert one_line
    why = turn.locator(".route details")
    expect(why.locator("p")).to_be_hidden()
    why.get_by_text("why").click()
    expect(why.locator("p")).to_be_visible()
    expect(why.locator("p")).to_contain_text("hearth models pull botpsy-0.8b")


def test_a_turn_a_friends_node_planned_is_labelled_with_the_friends_name(
    page: tuple[Page, Watch], chat: Chat
) -> None:
    kept = Conversations(chat.bench.phone / "conversations.db")
    conversation = kept.for_request(None, False)
    planned = AskResult(request_id="r1", route="remote", planner=FRIEND, answer="Planned.")
    kept.append(conversation, "planned by alice", planned, set())
    page_, _ = page
    page_.get_by_role("button", name="New conversation").click()  # the list is read again
    expect(page_.locator("#home")).not_to_have_text("Home: checking…")  # the roster's names
    page_.locator("#conversations").get_by_role(
        "button", name="planned by alice", exact=True
    ).click()
    turn = last_turn(page_)
    expect(turn.locator(".route strong")).to_have_text("friend alice-pc")
    expect(turn).to_have_attribute("data-route", "friend alice-pc")


def test_the_vendored_renderer_and_sanitiser_ship_in_the_package_with_their_licences() -> None:
    """setuptools ships what `package-data`'s globs match (a `*` stops at a folder)."""
    root = Path(__file__).resolve().parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["hearth.companion"]
    shipped = {p for g in globs for p in glob.glob(g, root_dir=root / "companion")}
    vendor = root / "companion" / "web" / "vendor"
    wanted = {"markdown-it.min.js", "markdown-it.LICENSE", "purify.min.js", "dompurify.LICENSE"}
    assert {p.name for p in vendor.iterdir()} == wanted
    assert {f"web/vendor/{name}" for name in wanted} <= shipped
    page = (root / "companion" / "web" / "index.html").read_text()
    assert '<script src="/static/vendor/markdown-it.min.js" defer></script>' in page
    assert '<script src="/static/vendor/purify.min.js" defer></script>' in page
