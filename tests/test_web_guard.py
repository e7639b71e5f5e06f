"""The loopback web guard (protocol/kit/web/) in front of a small real Starlette app, served
by Hypercorn's trio worker on a free port and reached with httpx: Host (DNS rebinding),
Origin (CSRF), the token and the login session, the security headers on every answer, the
failed-login budget, the token file; and hypothesis over Host/Origin values at the ASGI
level, where any byte string can be sent."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from hearth.protocol.kit.web import login as login_form
from hearth.protocol.kit.web.access import LOGIN_BURST
from hearth.protocol.kit.web.guard import guard
from hearth.protocol.kit.web.loopback import serve
from hearth.protocol.kit.web.token import load_token
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .trio_thread import started_in_thread

pytestmark = pytest.mark.timeout(120)

TOKEN = "t" * 10 + "0123456789abcdefghijklmnopqrstuvwxyz"
COOKIE = "test_session"
CSP = "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"


async def _home(request: Request) -> PlainTextResponse:
    # the app's own (laxer) policy must not survive the guard
    return PlainTextResponse("home", headers={"content-security-policy": "default-src *"})


async def _thing(request: Request) -> JSONResponse:
    return JSONResponse({"method": request.method})


def _app() -> Starlette:
    return Starlette(
        routes=[Route("/", _home), Route("/api/thing", _thing, methods=["GET", "POST"])]
    )


@contextmanager
def served(**options: Any) -> Iterator[int]:
    """The guarded app on a free loopback port, served from a trio thread; cancelled and
    joined on exit."""
    options = {"token": TOKEN, "cookie": COOKIE, "login_page": True, **options}
    with started_in_thread(partial(serve, guard(_app(), **options), 0), 30) as port:
        yield port


def client(port: int, host: str | None = None, **headers: str) -> httpx.Client:
    host = host or f"127.0.0.1:{port}"
    return httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"host": host, **headers},
        timeout=30,
        follow_redirects=False,
    )


def assert_secured(response: httpx.Response) -> None:
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    expected = "private, no-cache" if response.request.method == "POST" else "no-store"
    assert response.headers["cache-control"] == expected


def login(http: httpx.Client, port: int, token: str = TOKEN) -> httpx.Response:
    return http.post(
        "/login", data={"token": token}, headers={"origin": f"http://127.0.0.1:{port}"}
    )


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with served() as bound:
        yield bound


def test_foreign_or_mismatched_host_is_421(port: int) -> None:
    bearer = {"authorization": f"Bearer {TOKEN}"}
    for host in (f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", "localhost"):
        response = client(port, host, **bearer).get("/api/thing")
        assert response.status_code == 421, host
        assert response.json()["error"]["code"] == "invalid_input"
        assert_secured(response)
    for host in (f"127.0.0.1:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        assert client(port, host, **bearer).get("/api/thing").status_code == 200, host


def test_cross_origin_is_403_on_every_method(port: int) -> None:
    bearer = {"authorization": f"Bearer {TOKEN}"}
    for origin in (
        "http://evil.example",
        "null",
        f"http://localhost:{port}",
        f"https://127.0.0.1:{port}",
        f"http://127.0.0.1:{port + 1}",
    ):
        http = client(port, origin=origin, **bearer)
        for method in ("GET", "POST"):
            response = http.request(method, "/api/thing")
            assert response.status_code == 403, (origin, method)
            assert_secured(response)
    same = client(port, origin=f"http://127.0.0.1:{port}", **bearer)
    assert same.post("/api/thing").json() == {"method": "POST"}
    cross_site = client(port, **{"sec-fetch-site": "same-site"}, **bearer)
    assert cross_site.get("/api/thing").status_code == 403


def test_no_token_is_401_json_for_the_api_and_the_login_form_for_the_page(port: int) -> None:
    http = client(port)
    api = http.get("/api/thing")
    assert api.status_code == 401
    assert api.json()["error"]["code"] == "refused"
    assert api.headers["www-authenticate"].startswith("Bearer")
    assert http.get("/v1/models").status_code == 401
    page = http.get("/")
    assert page.status_code == 401
    assert 'type="password"' in page.text and "Access token" in page.text
    assert "Sign in" in page.text
    assert_secured(page)
    wrong = client(port, authorization="Bearer " + "x" * 40).get("/api/thing")
    assert wrong.status_code == 401
    right = client(port, authorization=f"Bearer {TOKEN}").get("/")
    assert right.text == "home"
    assert_secured(right)  # the app's own laxer policy was replaced


def test_login_sets_a_strict_session_cookie_that_is_not_the_token(port: int) -> None:
    http = client(port)
    assert http.get("/login").status_code == 200
    assert http.get("/login.css").headers["content-type"].startswith("text/css")
    wrong = login(http, port, "nope")
    assert wrong.status_code == 401
    assert '<p role="alert">Wrong token</p>' in wrong.text
    assert not http.cookies
    # signing in needs an Origin (login CSRF)
    assert http.post("/login", data={"token": TOKEN}).status_code == 403
    ok = login(http, port)
    assert ok.status_code == 303 and ok.headers["location"].startswith("/#key=")
    key = {"x-hearth-key": ok.headers["location"].removeprefix("/#key=")}
    set_cookie = ok.headers["set-cookie"]
    assert set_cookie.startswith(f"{COOKIE}=")
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
        assert attribute in set_cookie
    session = http.cookies[COOKIE]
    assert TOKEN not in session and len(session) >= 32
    assert key["x-hearth-key"] != session and len(key["x-hearth-key"]) >= 32
    assert http.get("/").text == "home"  # a page loads on the cookie alone
    assert http.get("/api/thing", headers=key).status_code == 200
    # the cookie reaches every port of 127.0.0.1 (a server there harvests it): alone, or
    # with a wrong key, it opens no API
    assert http.get("/api/thing").status_code == 401
    assert http.get("/api/thing", headers={"x-hearth-key": "k" * 43}).status_code == 401
    own = {"origin": f"http://127.0.0.1:{port}"}
    assert http.post("/api/thing", headers=own).status_code == 401
    # a state-changing request must also say where it comes from
    assert http.post("/api/thing", headers=key).status_code == 403
    assert http.post("/api/thing", headers={**own, **key}).status_code == 200
    # a cookie of the same name tossed in by a page on another port does not shadow it
    tossed = client(port, cookie=f"{COOKIE}=planted; {COOKIE}={session}", **key)
    assert tossed.get("/api/thing").status_code == 200
    assert client(port, cookie=f"{COOKIE}=planted", **key).get("/api/thing").status_code == 401
    # another guard (the other page) does not honour this page's session
    with served() as other:
        stranger = client(other, **key)
        stranger.cookies.set(COOKIE, session)
        assert stranger.get("/api/thing").status_code == 401
    logout = http.post("/logout", headers={"origin": f"http://127.0.0.1:{port}"})
    assert logout.status_code == 303
    replay = client(port, **key)
    replay.cookies.set(COOKIE, session)
    assert replay.get("/api/thing").status_code == 401


def test_login_body_must_be_a_small_form(port: int) -> None:
    http = client(port, origin=f"http://127.0.0.1:{port}")
    assert http.post("/login", json={"token": TOKEN}).status_code == 415
    assert http.post("/login", data={"token": TOKEN, "pad": "x" * 10_000}).status_code == 413
    many = {f"f{n}": "x" for n in range(20)}
    assert http.post("/login", data={"token": TOKEN, **many}).status_code == 400


def test_failed_logins_run_out_but_never_lock_out_the_right_token() -> None:
    """Anyone on the machine may send wrong tokens: that must not shut out the owner's
    apps and page (the token's 256 bits are what stops guessing)."""
    with served() as port:
        http = client(port)
        statuses = [login(http, port, f"guess{n}").status_code for n in range(LOGIN_BURST + 5)]
        assert statuses[0] == 401 and statuses[-1] == 429
        wrong = client(port, authorization="Bearer " + "w" * 40)
        assert wrong.get("/api/thing").status_code == 429
        assert login(http, port).status_code == 303
        bearer = client(port, authorization=f"Bearer {TOKEN}")
        assert bearer.get("/api/thing").status_code == 200


def test_a_login_body_that_trickles_in_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slowloris on the one body read before any token: the server answers 408 and hangs up
    instead of holding the connection for as long as the sender likes."""
    monkeypatch.setattr(login_form, "LOGIN_READ_S", 0.5)
    with served() as port, socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(
            b"POST /login HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://127.0.0.1:%d\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nt"
            % (port, port)
        )
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := raw.recv(4096)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]


def test_the_shared_script_and_stylesheet_need_a_session(port: int) -> None:
    http = client(port)
    assert http.get("/hearth.js").status_code == 401
    assert login(http, port).status_code == 303
    script, style = http.get("/hearth.js"), http.get("/hearth.css")
    assert script.status_code == 200 and "X-Hearth-Key" in script.text
    assert script.headers["content-type"].startswith("text/javascript")
    assert style.headers["content-type"].startswith("text/css")
    assert_secured(script)


def test_without_login_page_the_guard_serves_no_form() -> None:
    with served(login_page=False) as port:
        http = client(port)
        assert http.get("/").status_code == 401
        assert "password" not in http.get("/").text
        assert login(http, port).status_code == 401


def test_serve_stops_when_cancelled() -> None:
    with served() as port:
        assert client(port).get("/login").status_code == 200
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def test_a_taken_port_is_busy() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(HearthError) as refused:
            trio.run(serve, _app(), port)
    assert refused.value.code is ErrorCode.BUSY and str(port) in refused.value.message


def test_load_token_creates_a_private_file_once(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "api.token"
    token = load_token(path)
    assert len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_token(path) == token
    assert [p.name for p in path.parent.iterdir()] == ["api.token"]


def test_load_token_refuses_a_readable_or_empty_file(tmp_path: Path) -> None:
    readable = tmp_path / "readable.token"
    readable.write_text("y" * 43)
    os.chmod(readable, 0o644)
    with pytest.raises(PermissionError):
        load_token(readable)
    empty = tmp_path / "empty.token"
    empty.touch(mode=0o600)
    os.chmod(empty, 0o600)
    with pytest.raises(ValueError):
        load_token(empty)


# --- hypothesis at the ASGI level: arbitrary Host and Origin bytes ---------------------

PORT = 8123
ALLOWED_HOSTS = [f"{name}:{PORT}".encode() for name in ("127.0.0.1", "localhost", "[::1]")]
header_bytes = st.binary(max_size=40) | st.sampled_from(
    [
        *ALLOWED_HOSTS,
        b"127.0.0.1:81234",
        b"127.0.0.1:8123 ",
        b"127.0.0.1:8123.",
        b"localhost.:8123",
        b"evil.example:8123",
        b"127.0.0.1:8123@evil.example",
        b"http://127.0.0.1:8123",
        b"null",
    ]
)


def _call(headers: list[tuple[bytes, bytes]]) -> tuple[int, bool]:
    """The status the guard answers a GET /api/thing with, and whether the app was reached."""
    reached = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/thing",
        "headers": headers,
        "server": ("127.0.0.1", PORT),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    trio.run(guard(app, token=TOKEN, cookie=COOKIE, login_page=True), scope, receive, send)
    start = sent[0]
    assert (b"content-security-policy", CSP.encode()) in start["headers"]
    return start["status"], bool(reached)


@settings(max_examples=300, deadline=None)
@given(host=header_bytes, origin=st.none() | header_bytes, hosts=st.integers(1, 2))
def test_only_this_ports_loopback_host_and_its_own_origin_pass(
    host: bytes, origin: bytes | None, hosts: int
) -> None:
    headers = [(b"host", host)] * hosts + [(b"authorization", f"Bearer {TOKEN}".encode())]
    if origin is not None:
        headers.append((b"origin", origin))
    status, reached = _call(headers)
    host_ok = hosts == 1 and host.lower() in ALLOWED_HOSTS
    origin_ok = origin is None or origin == b"http://" + host.lower()
    if not host_ok:
        assert (status, reached) == (421, False)
    elif not origin_ok:
        assert (status, reached) == (403, False)
    else:
        assert (status, reached) == (200, True)
