"""Each middleware of the loopback web guard (protocol/kit/web/) alone, called at the ASGI
level with tables of hostile inputs, as starlette tests its trusted-host middleware: any
byte string can be sent there, headers repeated or absent, which no HTTP client allows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from hearth.protocol.kit.web.access import LOGIN_BURST, Access
from hearth.protocol.kit.web.auth import SessionOrBearer
from hearth.protocol.kit.web.files import SharedFiles
from hearth.protocol.kit.web.headers import SecurityHeaders
from hearth.protocol.kit.web.host import LoopbackHost
from hearth.protocol.kit.web.login import MAX_LOGIN_BODY, LoginForm, SignInPage
from hearth.protocol.kit.web.origin import SameOrigin

PORT = 8123
HOST = f"127.0.0.1:{PORT}".encode()
ORIGIN = b"http://" + HOST
TOKEN = "t" * 10 + "0123456789abcdefghijklmnopqrstuvwxyz"
COOKIE = "test_session"
LONG = b"x" * 100_000
FORM = (b"content-type", b"application/x-www-form-urlencoded")
PAGE = SignInPage("Hearth")

Headers = list[tuple[bytes, bytes]]


@dataclass
class Answer:
    """What the middleware did with one request."""

    status: int | None = None
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    reached: bool = False  # whether the app behind it was called
    closed: int | None = None  # a WebSocket's close code

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """The guarded app: 200, with a laxer policy and cache rule of its own."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.accept"})
        return
    own = [(b"Content-Security-Policy", b"default-src *"), (b"cache-control", b"max-age=9")]
    await send({"type": "http.response.start", "status": 200, "headers": own})
    await send({"type": "http.response.body", "body": b"app"})


def call(
    build: Any,
    headers: Headers,
    *,
    method: str = "GET",
    path: str = "/api/thing",
    kind: str = "http",
    body: bytes = b"",
    server: tuple[str, int] | None = ("127.0.0.1", PORT),
) -> Answer:
    """`build(app)`'s answer to one request."""
    answer = Answer()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        answer.reached = True
        await _app(scope, receive, send)

    scope: dict[str, Any] = {"type": kind, "method": method, "path": path, "headers": headers}
    if server is not None:
        scope["server"] = server
    pending = [{"type": "websocket.connect"}] if kind == "websocket" else []
    pending.append({"type": "http.request", "body": body, "more_body": False})

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status, answer.headers = message["status"], list(message["headers"])
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")
        elif message["type"] == "websocket.close":
            answer.closed = message["code"]
        elif message["type"] == "websocket.accept":
            answer.status = 101

    trio.run(build(app), scope, receive, send)
    return answer


# --- Host ------------------------------------------------------------------------------

HOSTS_PASSING = [
    [(b"host", HOST)],
    [(b"host", f"localhost:{PORT}".encode())],
    [(b"host", f"LocalHost:{PORT}".encode())],  # a name's case does not matter
    [(b"host", f"[::1]:{PORT}".encode())],
    [(b"Host", HOST)],  # nor a header name's
]
HOSTS_REFUSED = [
    [],  # absent
    [(b"host", b"")],
    [(b"host", HOST), (b"host", HOST)],  # repeated, even with the right value
    [(b"host", HOST), (b"host", b"evil.example")],
    [(b"host", b"127.0.0.1")],  # no port
    [(b"host", b"localhost")],
    [(b"host", b"[::1]")],
    [(b"host", f"::1:{PORT}".encode())],  # IPv6 without brackets
    [(b"host", f"[0:0:0:0:0:0:0:1]:{PORT}".encode())],  # another spelling of ::1
    [(b"host", f"[::ffff:127.0.0.1]:{PORT}".encode())],
    [(b"host", f"127.0.0.1:{PORT + 1}".encode())],  # another port
    [(b"host", f"127.0.0.1:0{PORT}".encode())],
    [(b"host", f"127.0.0.1.:{PORT}".encode())],  # trailing dot
    [(b"host", f"localhost.:{PORT}".encode())],
    [(b"host", f"127.1:{PORT}".encode())],
    [(b"host", f"2130706433:{PORT}".encode())],
    [(b"host", f"evil.example:{PORT}".encode())],  # DNS rebinding
    [(b"host", f"localhost.evil.example:{PORT}".encode())],
    [(b"host", HOST + b"@evil.example")],
    [(b"host", HOST + b" ")],
    [(b"host", b" " + HOST)],
    [(b"host", HOST + b"\x00")],
    [(b"host", b"http://" + HOST)],
    [(b"host", f"l\u043ecalhost:{PORT}".encode())],  # a Cyrillic o, as UTF-8
    [(b"host", f"l\u043ecalhost:{PORT}".encode("utf-16"))],
    [(b"host", LONG)],
]


@pytest.mark.parametrize("headers", HOSTS_PASSING)
def test_a_loopback_host_of_this_port_passes(headers: Headers) -> None:
    answer = call(LoopbackHost, headers)
    assert (answer.status, answer.reached) == (200, True)


@pytest.mark.parametrize("headers", HOSTS_REFUSED)
def test_any_other_host_is_421(headers: Headers) -> None:
    answer = call(LoopbackHost, headers)
    assert (answer.status, answer.reached) == (421, False)
    assert b'"code": "invalid_input"' in answer.body  # an API path: the API's error shape
    page = call(LoopbackHost, headers, path="/")
    assert (page.status, page.body) == (421, b"this Host is not served here")


def test_host_without_a_served_port_is_421() -> None:
    answer = call(LoopbackHost, [(b"host", HOST)], server=None)
    assert (answer.status, answer.reached) == (421, False)


def test_a_websocket_with_a_foreign_host_is_closed_unserved() -> None:
    answer = call(LoopbackHost, [(b"host", b"evil.example")], kind="websocket")
    assert (answer.closed, answer.reached) == (1008, False)
    assert call(LoopbackHost, [(b"host", HOST)], kind="websocket").reached


def test_lifespan_passes_every_middleware() -> None:
    for build in (LoopbackHost, SameOrigin, SecurityHeaders, SharedFiles):
        assert call(build, [], kind="lifespan").reached


# --- Origin ----------------------------------------------------------------------------

ORIGINS_PASSING = [
    [],  # no Origin: a client that is not a browser, or a browser's plain GET
    [(b"origin", ORIGIN)],
    [(b"sec-fetch-site", b"same-origin")],
    [(b"sec-fetch-site", b"none")],  # typed in the address bar
    [(b"origin", ORIGIN), (b"sec-fetch-site", b"same-origin")],
]
ORIGINS_REFUSED = [
    [(b"origin", b"null")],  # a sandboxed frame, a file:// page, a redirect
    [(b"origin", b"")],
    [(b"origin", b"http://evil.example")],
    [(b"origin", f"https://127.0.0.1:{PORT}".encode())],  # another scheme
    [(b"origin", f"ws://127.0.0.1:{PORT}".encode())],
    [(b"origin", f"HTTP://127.0.0.1:{PORT}".encode())],
    [(b"origin", f"http://127.0.0.1:{PORT + 1}".encode())],  # another port
    [(b"origin", b"http://127.0.0.1")],
    [(b"origin", f"http://localhost:{PORT}".encode())],  # another name than the Host
    [(b"origin", ORIGIN + b"/")],
    [(b"origin", ORIGIN + b".evil.example")],
    [(b"origin", ORIGIN + b"\x00")],
    [(b"origin", ORIGIN), (b"origin", ORIGIN)],  # repeated
    [(b"origin", ORIGIN + "\u00e9".encode())],
    [(b"origin", LONG)],
    [(b"sec-fetch-site", b"cross-site")],
    [(b"sec-fetch-site", b"same-site")],  # another port or subdomain of this site
    [(b"origin", ORIGIN), (b"sec-fetch-site", b"cross-site")],
]


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("extra", ORIGINS_PASSING)
def test_this_servers_own_origin_passes(extra: Headers, method: str) -> None:
    answer = call(SameOrigin, [(b"host", HOST), *extra], method=method)
    assert (answer.status, answer.reached) == (200, True)


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("extra", ORIGINS_REFUSED)
def test_any_other_origin_is_403_whatever_the_method(extra: Headers, method: str) -> None:
    answer = call(SameOrigin, [(b"host", HOST), *extra], method=method)
    assert (answer.status, answer.reached) == (403, False)
    assert b'"code": "refused"' in answer.body


def test_the_origin_is_matched_to_the_hosts_name_in_lower_case() -> None:
    upper = [(b"host", f"LOCALHOST:{PORT}".encode())]
    assert call(SameOrigin, [*upper, (b"origin", f"http://localhost:{PORT}".encode())]).reached
    assert not call(SameOrigin, [*upper, (b"origin", f"http://LOCALHOST:{PORT}".encode())]).reached


def test_an_origin_without_a_loopback_host_is_403() -> None:
    """Alone (outside the guard) the check refuses what it cannot compare."""
    answer = call(SameOrigin, [(b"host", b"evil.example"), (b"origin", b"http://evil.example")])
    assert (answer.status, answer.reached) == (403, False)


# --- session or bearer -----------------------------------------------------------------


def _signed_in(access: Access) -> tuple[str, str]:
    return access.sessions.new()


BEARERS_PASSING = [
    f"Bearer {TOKEN}".encode(),
    f"bearer {TOKEN}".encode(),  # the scheme's case does not matter
    f"BEARER {TOKEN}".encode(),
    f"Bearer  {TOKEN} ".encode(),  # nor spaces around the token
]
BEARERS_REFUSED = [
    b"",
    b"Bearer",
    b"Bearer ",
    f"Basic {TOKEN}".encode(),  # another scheme
    f"Token {TOKEN}".encode(),
    TOKEN.encode(),  # no scheme
    f"Bearer {TOKEN[:-1]}".encode(),  # a prefix of the token
    f"Bearer {TOKEN[:1]}".encode(),
    f"Bearer {TOKEN}x".encode(),
    f"Bearer {TOKEN.upper()}".encode(),
    f"Bearer {TOKEN}\u00e9".encode(),  # non-ASCII
    f"Bearer {TOKEN[:-1]}\u00e9".encode("latin-1"),
    f"Bearer {TOKEN}\x00".encode(),
    b"Bearer " + LONG,
]


@pytest.mark.parametrize("value", BEARERS_PASSING)
def test_the_bearer_token_passes(value: bytes) -> None:
    access = Access(TOKEN, COOKIE)
    answer = call(lambda app: SessionOrBearer(app, access), [(b"authorization", value)])
    assert (answer.status, answer.reached) == (200, True)


@pytest.mark.parametrize("value", BEARERS_REFUSED)
def test_any_other_authorization_is_401(value: bytes) -> None:
    access = Access(TOKEN, COOKIE)
    answer = call(lambda app: SessionOrBearer(app, access), [(b"authorization", value)])
    assert (answer.status, answer.reached) == (401, False)
    assert answer.header(b"www-authenticate") == b'Bearer realm="hearth"'


def test_a_repeated_authorization_is_401_even_when_both_are_right() -> None:
    access = Access(TOKEN, COOKIE)
    right = (b"authorization", f"Bearer {TOKEN}".encode())
    answer = call(lambda app: SessionOrBearer(app, access), [right, right])
    assert (answer.status, answer.reached) == (401, False)


def test_wrong_tokens_past_the_burst_are_429_but_the_right_one_passes() -> None:
    access = Access(TOKEN, COOKIE)
    wrong = [(b"authorization", b"Bearer " + b"w" * 43)]
    statuses = [
        call(lambda app: SessionOrBearer(app, access), wrong).status for _ in range(LOGIN_BURST + 2)
    ]
    assert statuses[:LOGIN_BURST] == [401] * LOGIN_BURST and statuses[-1] == 429
    right = [(b"authorization", f"Bearer {TOKEN}".encode())]
    assert call(lambda app: SessionOrBearer(app, access), right).reached


def _cookies_and_keys(session: str, key: str) -> list[tuple[Headers, str, str, int]]:
    """(headers, method, path, status) for a signed-in browser's requests, right and wrong."""
    c = COOKIE
    cookie = (b"cookie", f"{c}={session}".encode())
    right_key = (b"x-hearth-key", key.encode())
    origin = (b"origin", ORIGIN)
    return [
        ([cookie, right_key], "GET", "/api/thing", 200),
        ([cookie], "GET", "/", 200),  # a page load needs no key
        ([cookie], "HEAD", "/hearth.js", 200),
        ([cookie, right_key, origin], "POST", "/api/thing", 200),
        ([cookie, right_key], "POST", "/api/thing", 403),  # a write needs an Origin
        ([cookie, origin], "POST", "/page", 401),  # a write needs the key, page or not
        ([cookie], "GET", "/api/thing", 401),  # the API needs the key
        ([cookie], "GET", "/v1/models", 401),
        ([cookie, (b"x-hearth-key", b"")], "GET", "/api/thing", 401),
        ([cookie, (b"x-hearth-key", key[:-1].encode())], "GET", "/api/thing", 401),
        ([cookie, (b"x-hearth-key", key.encode() + b"\xc3\xa9")], "GET", "/api/thing", 401),
        ([cookie, (b"x-hearth-key", LONG)], "GET", "/api/thing", 401),
        ([cookie, right_key, right_key], "GET", "/api/thing", 401),  # the key repeated
        ([(b"cookie", f"{c}=".encode()), right_key], "GET", "/api/thing", 401),
        ([(b"cookie", f"{c}={session[:-1]}".encode()), right_key], "GET", "/api/thing", 401),
        ([(b"cookie", f"{c}={session}x".encode()), right_key], "GET", "/api/thing", 401),
        ([(b"cookie", f"other={session}".encode()), right_key], "GET", "/api/thing", 401),
        ([(b"cookie", f"{c}={session}\u00e9".encode()), right_key], "GET", "/api/thing", 401),
        ([(b"cookie", f"{c}=".encode() + LONG), right_key], "GET", "/api/thing", 401),
        ([(b"cookie", f"{c}=planted; {c}={session}".encode()), right_key], "GET", "/api", 200),
        ([(b"cookie", b"a=1"), cookie, right_key], "GET", "/api/thing", 200),
        ([(b"cookie", f"{c}=planted".encode()), right_key], "GET", "/api/thing", 401),
        ([right_key], "GET", "/api/thing", 401),
    ]


def test_a_session_passes_only_with_its_key_and_for_a_write_an_origin() -> None:
    access = Access(TOKEN, COOKIE)
    session, key = _signed_in(access)
    other_session, other_key = _signed_in(access)
    borrowed = [(b"cookie", f"{COOKIE}={session}".encode()), (b"x-hearth-key", other_key.encode())]
    cases = [*_cookies_and_keys(session, key), (borrowed, "GET", "/api/thing", 401)]
    for headers, method, path, status in cases:
        answer = call(lambda app: SessionOrBearer(app, access), headers, method=method, path=path)
        assert (answer.status, answer.reached) == (status, status == 200), (headers, method, path)
    assert other_session != session


def test_another_guards_session_opens_nothing() -> None:
    mine, theirs = Access(TOKEN, COOKIE), Access(TOKEN, COOKIE)
    session, key = _signed_in(theirs)
    headers = [(b"cookie", f"{COOKIE}={session}".encode()), (b"x-hearth-key", key.encode())]
    assert call(lambda app: SessionOrBearer(app, mine), headers).status == 401


def test_a_refused_page_load_of_the_root_is_the_sign_in_form() -> None:
    access = Access(TOKEN, COOKIE)
    page = call(lambda app: SessionOrBearer(app, access, PAGE), [], path="/")
    assert page.status == 401 and b'type="password"' in page.body and not page.reached
    bare = call(lambda app: SessionOrBearer(app, access), [], path="/")
    assert bare.status == 401 and b"password" not in bare.body


def test_a_too_short_token_is_never_a_guards_token() -> None:
    for token in ("", "x", TOKEN[:31]):
        with pytest.raises(ValueError):
            Access(token, COOKIE)


# --- login -----------------------------------------------------------------------------


def _login(access: Access, body: bytes, *extra: tuple[bytes, bytes]) -> Answer:
    headers = [(b"origin", ORIGIN), FORM, *extra]
    build = lambda app: LoginForm(app, access, PAGE)  # noqa: E731
    return call(build, headers, method="POST", path="/login", body=body)


LOGIN_BODIES = [
    (b"", 401),
    (b"token=", 401),
    (f"token={TOKEN[:-1]}".encode(), 401),  # a prefix of the token
    (f"token={TOKEN}x".encode(), 401),
    (f"token={TOKEN}%C3%A9".encode(), 401),  # non-ASCII
    (f"token={TOKEN}%FF".encode(), 401),  # not even UTF-8
    (f"token={TOKEN}%00".encode(), 401),
    (f"tokens={TOKEN}".encode(), 401),  # another field
    (b"token=" + b"x" * (MAX_LOGIN_BODY - 6), 401),  # as long as a form may be
    (b"token=" + b"x" * MAX_LOGIN_BODY, 413),  # longer
    (b"&".join(b"f%d=x" % n for n in range(20)), 400),  # more fields than a form has
    (f"token={TOKEN}".encode(), 303),
    (f"token=%20{TOKEN}%20".encode(), 303),  # pasted with spaces around it
    (f"token={TOKEN}&token=wrong".encode(), 303),  # the first value counts
]


@pytest.mark.parametrize(("body", "status"), LOGIN_BODIES)
def test_only_the_token_signs_in(body: bytes, status: int) -> None:
    access = Access(TOKEN, COOKIE)
    answer = _login(access, body)
    assert (answer.status, answer.reached) == (status, False)
    cookie = answer.header(b"set-cookie")
    if status == 303:
        assert cookie is not None and cookie.startswith(f"{COOKIE}=".encode())
        assert b"HttpOnly" in cookie and b"SameSite=Strict" in cookie
        session = cookie.split(b";")[0].split(b"=", 1)[1].decode()
        key = (answer.header(b"location") or b"").removeprefix(b"/#key=").decode()
        assert access.sessions.valid(session, key) and TOKEN not in session + key
    else:
        assert cookie is None
    if status == 401:
        assert b"Wrong token" in answer.body


LOGIN_REQUESTS = [
    ("GET", "/login", [], 200),
    ("HEAD", "/login", [], 200),
    ("GET", "/login.css", [], 200),
    ("PUT", "/login", [(b"origin", ORIGIN), FORM], 405),
    ("GET", "/logout", [], 405),
    ("POST", "/login", [FORM], 403),  # signing in needs an Origin (login CSRF)
    ("POST", "/logout", [], 403),
    ("POST", "/login", [(b"origin", ORIGIN)], 415),  # no content type
    ("POST", "/login", [(b"origin", ORIGIN), (b"content-type", b"application/json")], 415),
    ("POST", "/login", [(b"origin", ORIGIN), (b"content-type", b"text/plain")], 415),
    ("POST", "/login", [(b"origin", ORIGIN), FORM, FORM], 415),  # repeated
]


@pytest.mark.parametrize(("method", "path", "headers", "status"), LOGIN_REQUESTS)
def test_the_login_routes_answer_themselves(
    method: str, path: str, headers: Headers, status: int
) -> None:
    access = Access(TOKEN, COOKIE)
    body = f"token={TOKEN}".encode()
    build = lambda app: LoginForm(app, access, PAGE)  # noqa: E731
    answer = call(build, headers, method=method, path=path, body=body)
    assert (answer.status, answer.reached) == (status, False)


def test_other_paths_and_websockets_pass_the_login_form() -> None:
    access = Access(TOKEN, COOKIE)
    build = lambda app: LoginForm(app, access, PAGE)  # noqa: E731
    for path in ("/", "/api/thing", "/login/", "/LOGIN", "/loginx"):
        assert call(build, [], path=path).reached, path
    assert call(build, [], path="/login", kind="websocket").reached


def test_logout_ends_the_session_and_clears_the_cookie() -> None:
    access = Access(TOKEN, COOKIE)
    session, key = _signed_in(access)
    headers = [(b"origin", ORIGIN), (b"cookie", f"{COOKIE}={session}".encode())]
    build = lambda app: LoginForm(app, access, PAGE)  # noqa: E731
    answer = call(build, headers, method="POST", path="/logout")
    assert answer.status == 303 and b"Max-Age=0" in (answer.header(b"set-cookie") or b"")
    assert not access.sessions.valid(session, key)


def test_wrong_logins_past_the_burst_are_429_but_the_token_signs_in() -> None:
    access = Access(TOKEN, COOKIE)
    statuses = [_login(access, b"token=guess").status for _ in range(LOGIN_BURST + 2)]
    assert statuses[0] == 401 and statuses[-1] == 429
    assert _login(access, f"token={TOKEN}".encode()).status == 303


# --- security headers ------------------------------------------------------------------

CSP = b"default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"


@pytest.mark.parametrize(
    ("method", "cache"),
    [
        ("GET", b"no-store"),
        ("HEAD", b"no-store"),
        ("POST", b"private, no-cache"),
        ("DELETE", b"no-store"),
    ],
)
def test_every_answer_carries_the_security_headers_in_place_of_the_apps(
    method: str, cache: bytes
) -> None:
    answer = call(SecurityHeaders, [], method=method)
    assert answer.reached
    names = [name.lower() for name, _ in answer.headers]
    assert names.count(b"content-security-policy") == 1 and names.count(b"cache-control") == 1
    assert answer.header(b"content-security-policy") == CSP
    assert answer.header(b"x-content-type-options") == b"nosniff"
    assert answer.header(b"referrer-policy") == b"same-origin"
    assert answer.header(b"cache-control") == cache


def test_the_guards_own_refusals_carry_the_security_headers() -> None:
    answer = call(lambda app: SecurityHeaders(LoopbackHost(app)), [(b"host", b"evil")])
    assert answer.status == 421 and answer.header(b"content-security-policy") == CSP


# --- shared files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "served"),
    [
        ("GET", "/hearth.js", True),
        ("HEAD", "/hearth.css", True),
        ("POST", "/hearth.js", False),
        ("GET", "/hearth.js/", False),
        ("GET", "/HEARTH.JS", False),
        ("GET", "/static/hearth.js", False),
        ("GET", "/../hearth.js", False),
    ],
)
def test_the_shared_files_are_answered_at_their_paths_only(
    method: str, path: str, served: bool
) -> None:
    answer = call(SharedFiles, [], method=method, path=path)
    assert answer.reached is not served
    if served:
        assert answer.status == 200 and len(answer.body) > 100
        assert (answer.header(b"content-type") or b"").startswith(b"text/")


def test_the_sign_in_page_names_the_token_file_as_text_never_markup() -> None:
    page = SignInPage("Home <b>node</b>", Path("/srv/it's <script>x</script>/api.token"))
    shown = page.html(wrong=True).decode()
    assert "<script>" not in shown and "<b>" not in shown
    assert "Home &lt;b&gt;node&lt;/b&gt;" in shown and "Wrong token" in shown
    # the command that prints it, quoted for a shell, then escaped for the page
    assert "cat &#x27;/srv/it&#x27;&quot;&#x27;&quot;&#x27;s &lt;script&gt;" in shown
    assert "token-help" not in SignInPage("Hearth").html(wrong=False).decode()


EXTRA_HOSTS = ["Phone.lan", "tablet.lan:9000"]


@pytest.mark.parametrize(
    ("host", "passes"),
    [
        (f"phone.lan:{PORT}", True),
        (f"PHONE.LAN:{PORT}", True),
        ("tablet.lan:9000", True),  # a name given with its own port (a proxy's)
        (f"127.0.0.1:{PORT}", True),
        (f"phone.lan:{PORT + 1}", False),
        ("phone.lan", False),
        (f"tablet.lan:{PORT}", False),
        (f"phone.lan.:{PORT}", False),
        (f"evil.phone.lan:{PORT}", False),
        (f"phone.lan.evil.example:{PORT}", False),
    ],
)
def test_more_host_names_pass_only_as_given(host: str, passes: bool) -> None:
    answer = call(lambda app: LoopbackHost(app, EXTRA_HOSTS), [(b"host", host.encode())])
    assert answer.reached is passes
    origin = [(b"host", host.encode()), (b"origin", f"http://{host.lower()}".encode())]
    assert call(lambda app: SameOrigin(app, EXTRA_HOSTS), origin).reached is passes


def test_the_openai_api_is_refused_in_openais_error_shape() -> None:
    answer = call(LoopbackHost, [(b"host", b"evil.example")], path="/v1/chat/completions")
    assert answer.status == 421
    assert answer.body.startswith(b'{"error": {"message": "this Host is not served here"')
    assert b'"code": "misdirected_request"' in answer.body
