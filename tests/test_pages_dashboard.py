"""The node's dashboard in a real browser: Playwright drives Debian's headless Chromium
(never a downloaded one) against a real `hearth-node serve --dashboard-port P` serving the
tiny model. Sign in with the dashboard token, see the peer id, create an invite whose QR
code (a screenshot of the element, decoded by zxing-cpp) is exactly the URI shown, pair a
real phone with it through the `hearth` CLI, grant and deny it a role, see its hostile
name shown literally, revoke it from the dashboard and watch its next remote ask fail.
After sign-in the page logs no console error, no failed request and no request to
another origin; screenshots at 360 and 1280 px go to docs/screenshots/."""

from __future__ import annotations

import io
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from .conftest import Processes
from .nodes import BIN, init_phone, start_node
from .pages import (
    CHROMIUM,
    CSP,
    MISSING,
    SCREENSHOTS,
    Watch,
    clipboard,
    in_view,
    screenshots,
    signed_in,
)
from .upstream_servers import free_port

pytestmark = pytest.mark.timeout(300)
HOSTILE_NAME = "<img src=x onerror=alert(1)>\u202eemoh"  # markup, and a bidi override
SHOWN_NAME = "<img src=x onerror=alert(1)>\\u202eemoh"  # as every page shows it

if not CHROMIUM.exists():
    pytest.skip(MISSING, allow_module_level=True)


@dataclass
class Dashboard:
    url: str
    token: str
    peer_id: str
    phone: Path


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Iterator[Dashboard]:
    processes = Processes()
    root = tmp_path_factory.mktemp("dashboard")
    try:
        port = free_port()
        node = start_node(
            processes, root / "node", "--model", str(tiny_models[0]), "--dashboard-port", str(port)
        )
        ready = json.loads((root / "node" / "ready.json").read_text())
        assert ready["dashboard"] == f"http://127.0.0.1:{port}"
        token_file = root / "node" / "dashboard.token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        phone = root / "phone"
        init_phone(phone)
        yield Dashboard(ready["dashboard"], token_file.read_text().strip(), node.peer_id, phone)
    finally:
        processes.cleanup()


@pytest.fixture
def page(browser: Browser, dashboard: Dashboard) -> Iterator[tuple[Page, Watch]]:
    with signed_in(browser, dashboard.url, dashboard.token) as signed:
        yield signed


def peer_id_shown(page: Page) -> str:
    return (
        page.locator("xpath=//dt[normalize-space()='Peer ID']/following-sibling::dd[1]")
        .locator(".id")
        .inner_text()
    )


def red(locator) -> bool:
    """Whether `locator`'s text or background is the destructive red (not the accent)."""
    colours = locator.evaluate(
        "e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"
    )
    return "rgb(165, 29, 29)" in colours


def hearth(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "hearth"), *args], capture_output=True, text=True, timeout=180)


def test_sign_in_shows_the_peer_id_under_a_strict_csp(
    browser: Browser, dashboard: Dashboard
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        first = page.goto(dashboard.url + "/")
        assert first is not None and first.headers["content-security-policy"] == CSP
        page.get_by_label("Access token").fill("not the token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_have_text("Wrong token")
        page.get_by_label("Access token").fill(dashboard.token)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#peer-id")).to_have_text(dashboard.peer_id)
        assert peer_id_shown(page) == dashboard.peer_id
        cookie = next(c for c in context.cookies() if c["name"] == "hearth_dashboard")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert dashboard.token not in cookie["value"]
        again = page.goto(dashboard.url + "/")
        assert again is not None and again.status == 200
        assert again.headers["content-security-policy"] == CSP
    finally:
        context.close()


def test_pair_with_the_qr_code_then_revoke_from_the_dashboard(
    page: tuple[Page, Watch], dashboard: Dashboard
) -> None:
    page_, watch = page
    expect(page_.locator("#peer-id")).to_have_text(dashboard.peer_id)

    # "Pair a device": phone by default, the QR code is exactly the URI shown
    page_.get_by_role("button", name="Pair a device").click()
    pair = page_.get_by_role("dialog", name="Pair a device")
    expect(pair.get_by_role("radio", name="Phone")).to_be_checked()
    with page_.expect_response(lambda r: "/qr/" in r.url):
        pair.get_by_role("button", name="Create invite").click()
    qr = pair.get_by_role("img", name="Pairing QR code")
    expect(qr).to_be_visible()
    box = qr.bounding_box()
    assert box is not None and box["width"] >= 200 and box["height"] >= 200
    uri = pair.locator("code").inner_text()
    assert uri.startswith("hearth://pair?")
    expect(pair.get_by_text(re.compile(r"^Expires in (09:[0-5]\d|10:00)$"))).to_be_visible()
    import zxingcpp

    decoded = zxingcpp.read_barcodes(Image.open(io.BytesIO(qr.screenshot())))
    assert [code.text for code in decoded] == [uri]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page_.screenshot(path=SCREENSHOTS / "dashboard-pair.png")

    # a real phone pairs with it under a hostile name, and can ask its home
    paired = hearth("pair", uri, "--name", HOSTILE_NAME, "--json", "--home", str(dashboard.phone))
    assert paired.returncode == 0, paired.stdout + paired.stderr
    phone_id = json.loads(paired.stdout)["peer_id"]
    asked = hearth(
        "ask", "--route", "remote", "--tool-choice", "none", "--json",
        "--home", str(dashboard.phone), "hello",
    )  # fmt: skip
    assert asked.returncode == 0, asked.stdout + asked.stderr
    pair.get_by_role("button", name="Close").click()

    # the member's row: its name shown as text, never as markup
    row = page_.get_by_role("row").filter(has_text=phone_id)
    expect(row).to_be_visible(timeout=20_000)
    expect(row.get_by_role("cell").first).to_have_text(SHOWN_NAME)
    assert page_.locator("#members img").count() == 0
    expect(row.get_by_role("cell").nth(2)).to_have_text("phone")

    # grant, then deny, a role: each confirmed in a dialog
    row.get_by_role("button", name="Grant").click()
    confirm = page_.get_by_role("dialog", name=f"Grant a role to {SHOWN_NAME}")
    confirm.get_by_label("Role").select_option("relay")
    confirm.get_by_role("button", name="Confirm").click()
    expect(row.get_by_role("cell").nth(2)).to_have_text("phone, relay")
    row.get_by_role("button", name="Deny").click()
    confirm = page_.get_by_role("dialog", name=f"Deny a role to {SHOWN_NAME}")
    confirm.get_by_label("Role").select_option("relay")
    confirm.get_by_role("button", name="Confirm").click()
    expect(row.get_by_role("cell").nth(2)).to_have_text("phone")

    # the phone is idle, not failing: said plainly, with when it was last heard from
    reach = row.get_by_role("cell").nth(3)
    expect(reach).to_have_text(re.compile(r"^idle, last seen (just now|\d+ min ago)$"))
    assert not red(reach)
    # what takes away looks destructive; what gives does not
    assert red(row.get_by_role("button", name="Revoke"))
    assert red(row.get_by_role("button", name="Deny"))
    assert not red(row.get_by_role("button", name="Grant"))
    # the search epoch is a time, not a count of milliseconds
    epoch = page_.locator("#search-epoch")
    expect(epoch).to_have_text(re.compile(r"\d{4}.*\((just now|\d+ (min|h|days) ago)\)$"))
    assert not re.fullmatch(r"\d+", epoch.inner_text())

    # screenshots with a member on the roster, at a phone's width and a desktop's
    screenshots(page_, "dashboard")

    # a cancelled revoke changes nothing; a confirmed one cuts the phone off
    row.get_by_role("button", name="Revoke").click()
    confirm = page_.get_by_role("dialog", name=f"Revoke {SHOWN_NAME}")
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_be_hidden()
    row.get_by_role("button", name="Revoke").click()
    with page_.expect_response(lambda r: r.url.endswith("/api/revoke")) as revoked:
        confirm.get_by_role("button", name="Confirm").click()
    assert revoked.value.json()["revoked"] == phone_id
    expect(row).to_have_count(0)
    cut = hearth(
        "ask", "--route", "remote", "--tool-choice", "none", "--json",
        "--home", str(dashboard.phone), "hello again",
    )  # fmt: skip
    assert cut.returncode == 4, cut.stdout + cut.stderr
    assert json.loads(cut.stdout)["error"]["code"] == "refused"
    assert watch.problems == []


def test_the_json_endpoints_take_only_their_own_small_bodies(dashboard: Dashboard) -> None:
    bearer = {"Authorization": f"Bearer {dashboard.token}"}
    with httpx.Client(base_url=dashboard.url, headers=bearer, timeout=60) as http:
        extra = http.post("/api/revoke", json={"peer": dashboard.peer_id, "sneaky": 1})
        unknown_role = http.post("/api/grant", json={"peer": dashboard.peer_id, "role": "wizard"})
        founder = http.post("/api/revoke", json={"peer": dashboard.peer_id})
        not_json = http.post("/api/invite", content=b"role=phone")
        huge = http.post("/api/invite", json={"role": "phone", "pad": "x" * 10_000})
        no_qr = http.get("/qr/not-an-invite")
        friend = http.post("/api/invite", json={"role": "friend"})
        qr = http.get(friend.json()["qr"])
    for refused in (extra, unknown_role, founder, not_json, huge, no_qr):
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_input"
    assert friend.json()["uri"].startswith("hearth://pair?")
    assert qr.headers["content-type"].startswith("image/svg+xml")
    assert qr.content.startswith(b"<svg") and b"viewBox" in qr.content


def test_copy_buttons_and_a_pairing_dialog_that_fits_a_phone_and_a_laptop(
    page: tuple[Page, Watch], dashboard: Dashboard
) -> None:
    page_, _ = page
    expect(page_.locator("#peer-id")).to_have_text(dashboard.peer_id)
    page_.get_by_role("button", name="Copy peer ID").click()
    assert clipboard(page_) == dashboard.peer_id
    for width, height in ((360, 640), (1280, 800)):
        page_.set_viewport_size({"width": width, "height": height})
        page_.get_by_role("button", name="Pair a device").click()
        pair = page_.get_by_role("dialog", name="Pair a device")
        pair.get_by_role("button", name="Create invite").click()
        qr = pair.get_by_role("img", name="Pairing QR code")
        expect(qr).to_be_visible()
        box = qr.bounding_box()
        assert box is not None and box["width"] >= 200
        uri = pair.locator("code").inner_text()
        pair.get_by_role("button", name="Copy URI").click()
        assert clipboard(page_) == uri
        close = pair.get_by_role("button", name="Close")
        assert in_view(page_, close), f"Close is cut off at {width}x{height}"
        assert in_view(page_, pair.get_by_role("button", name="Copy URI"))
        page_.screenshot(path=SCREENSHOTS / f"dashboard-pair-{width}.png")
        close.click()
        expect(pair).to_be_hidden()
