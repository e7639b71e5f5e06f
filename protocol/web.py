"""The loopback web guard and server shared by the companion's API/chat page and the node's
dashboard.

`guard` wraps an ASGI app so that only this machine's browser tabs and clients holding the
token reach it: a Host other than this port's loopback names is 421 (DNS rebinding), an
`Origin` of another site is 403 on every request (CSRF), and a request without the bearer
token or a session from `POST /login` is 401. Every response carries a strict
Content-Security-Policy. Past the guard, `/hearth.js` and `/hearth.css` are the script and
stylesheet both pages share (package data of `hearth.protocol`: the companion and the
node never import each other). `serve` runs an app with Hypercorn's trio worker on 127.0.0.1.

A session is a cookie AND a key: cookies ignore ports, so any server on another port of
127.0.0.1 (another user's, another Android app's) that the browser visits receives the
session cookie. The login's redirect hands the page a per-session key in the URL fragment
(never sent to any server); the page keeps it in its origin's sessionStorage and sends it
as `X-Hearth-Key` with every request but a plain page or file load (GET/HEAD outside
`/api` and `/v1`), which the cookie alone may fetch.
"""

from __future__ import annotations

import contextlib
import hmac
import html
import json
import logging
import os
import secrets
import shlex
import socket
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qs

import anyio
from anyio.abc import TaskStatus
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hearth.protocol.request_log import access_log
from hearth.protocol.wire.errors import ErrorCode, HearthError

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    # not `no-referrer`: under it a browser sends `Origin: null` with the login form's POST
    (b"referrer-policy", b"same-origin"),
)
# Nothing a guarded page answers is kept on disk. A POST's answer (never reused by a browser
# cache anyway) says `no-cache` instead: Chromium reports a streamed `no-store` fetch that
# ended cleanly as aborted (microsoft/playwright#42742), which the chat page's asks are.
NO_STORE = (b"cache-control", b"no-store")
POST_NO_CACHE = (b"cache-control", b"private, no-cache")
MIN_TOKEN_CHARS = 32  # a shorter token file (empty, truncated) is refused, never trusted
MAX_LOGIN_BODY = 4096  # bytes of the login form
MAX_SESSIONS = 64  # oldest sessions are dropped past this
SESSION_SECONDS = 24 * 3600
LOGIN_BURST = 10  # failed token checks answered 401 at once...
LOGIN_REFILL_SECONDS = 3.0  # ...then one more per this many seconds (the rest: 429)
LOGIN_READ_S = 10.0  # the login form's body arrives within this, else 408 (slowloris)
LOGIN_CSS = b"""body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f4ef;color:#222}
main{max-width:22rem;margin:15vh auto;padding:1.5rem;background:#fff;border-radius:.5rem;
box-shadow:0 1px 4px #0002}h1{margin-top:0;font-size:1.4rem}label{display:block;margin-bottom:.3rem}
input{box-sizing:border-box;width:100%;padding:.5rem;font:inherit;margin-bottom:1rem}
button{padding:.5rem 1.2rem;font:inherit}[role=alert]{color:#a00;font-weight:600}
#token-help{color:#5d574f;font-size:.9rem;overflow-wrap:anywhere}
"""

# The script and stylesheet every page shares, answered to a signed-in GET of its path
SHARED_FILES: dict[str, tuple[bytes, str]] = {
    f"/{name}": ((Path(__file__).parent / "static" / name).read_bytes(), kind)
    for name, kind in (("hearth.js", "text/javascript"), ("hearth.css", "text/css"))
}

HTTP_STATUS: dict[ErrorCode, int] = {  # the HTTP status a typed error is answered with
    ErrorCode.INVALID_INPUT: 400,
    ErrorCode.REFUSED: 403,
    ErrorCode.PLAN_REJECTED: 422,
    ErrorCode.BUSY: 429,
    ErrorCode.CANCELLED: 499,  # the client went away (nginx's code; nobody reads it)
    ErrorCode.INTERNAL: 500,
    ErrorCode.PROTOCOL_ERROR: 502,
    ErrorCode.UNREACHABLE: 503,
    ErrorCode.MODEL_NOT_LOADED: 503,
    ErrorCode.TIMED_OUT: 504,
}

log = logging.getLogger(__name__)


def load_token(path: Path) -> str:
    """The access token kept in `path`: read it, or create it (mode 0600) on first use.

    Created through a private temporary file linked into place, so a reader never sees a
    half-written token and two starters agree on one. A token shorter than
    `MIN_TOKEN_CHARS` or a file others may read is refused rather than used.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(32) + "\n")
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):  # another starter won: use its token
                os.link(temp, path)
        finally:
            temp.unlink(missing_ok=True)
    if path.stat().st_mode & 0o077:
        raise PermissionError(f"{path} may be read by others; make it mode 0600")
    token = path.read_text(encoding="utf-8").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"{path} holds no usable token (delete it to make a new one)")
    return token


def _login_html(title: str, wrong: bool, token_file: Path | None) -> bytes:
    alert = '<p role="alert">Wrong token</p>' if wrong else ""
    name = html.escape(title)
    where = (
        ""
        if token_file is None
        else f'<p id="token-help">The token is in the file <code>{html.escape(str(token_file))}'
        f"</code> on this computer; <code>cat {html.escape(shlex.quote(str(token_file)))}"
        "</code> prints it.</p>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{name}: sign in</title><link rel="stylesheet" href="/login.css"></head>'
        f"<body><main><h1>{name}</h1>{alert}"
        '<form method="post" action="/login">'
        '<label for="token">Access token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password"'
        " required autofocus>"
        f'<button type="submit">Sign in</button></form>{where}</main></body></html>'
    ).encode()


class _Sessions:
    """Random session ids (the cookie) and their keys (the page's header) handed out at
    login, kept in memory (never the token itself)."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[float, str]] = OrderedDict()  # id -> expiry, key

    def new(self) -> tuple[str, str]:
        session, key = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self._held[session] = (time.monotonic() + SESSION_SECONDS, key)
        while len(self._held) > MAX_SESSIONS:
            self._held.popitem(last=False)
        return session, key

    def valid(self, session: str, key: str | None) -> bool:
        """Whether `session` is live and `key` is its key (None: no key asked for)."""
        held = self._held.get(session)
        if held is None:
            return False
        if held[0] < time.monotonic():
            del self._held[session]
            return False
        return key is None or hmac.compare_digest(key.encode(), held[1].encode())

    def drop(self, session: str) -> None:
        self._held.pop(session, None)


class _FailureBudget:
    """A token bucket of failed token checks: a burst of `LOGIN_BURST`, then one per
    `LOGIN_REFILL_SECONDS`; a wrong token past it is answered 429. The right token always
    passes: anyone on the machine can send wrong ones, and must not lock the owner out."""

    def __init__(self) -> None:
        self._left = float(LOGIN_BURST)
        self._at = time.monotonic()

    def exhausted(self) -> bool:
        now = time.monotonic()
        self._left = min(float(LOGIN_BURST), self._left + (now - self._at) / LOGIN_REFILL_SECONDS)
        self._at = now
        return self._left < 1

    def spend(self) -> None:
        self._left -= 1


class _Request:
    """What the guard reads of one HTTP or WebSocket scope."""

    def __init__(self, scope: Scope) -> None:
        self.method: str = scope.get("method", "GET")
        self.path: str = scope.get("path", "/")
        server = scope.get("server")
        self.port: int | None = server[1] if server else None
        self.headers: dict[bytes, list[bytes]] = {}
        for name, value in scope.get("headers", []):
            self.headers.setdefault(name.lower(), []).append(value)

    def header(self, name: bytes) -> str | None:
        """The single value of `name`; None when absent, "" (never valid) when repeated."""
        values = self.headers.get(name)
        if not values:
            return None
        if len(values) > 1:
            return ""
        return values[0].decode("latin-1")

    def cookies(self, name: str) -> list[str]:
        """Every value sent for cookie `name`: a page on another port of this host may set
        one more of the same name (cookies ignore ports), so none is trusted for being first."""
        values = []
        for raw in self.headers.get(b"cookie", []):
            for part in raw.decode("latin-1").split(";"):
                key, _, value = part.strip().partition("=")
                if key == name:
                    values.append(value)
        return values

    def bearer(self) -> str | None:
        auth = self.header(b"authorization")
        if auth is None:
            return None
        scheme, _, value = auth.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else ""

    @property
    def is_api(self) -> bool:
        return self.path == "/api" or self.path.startswith(("/api/", "/v1/")) or self.path == "/v1"


class Guard:
    """The ASGI middleware `guard` returns; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        cookie: str,
        login_page: bool,
        title: str,
        token_file: Path | None = None,
        hosts: Sequence[str] = (),
    ) -> None:
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError("the access token is too short")
        self.app = app
        self._token = token.encode()
        self._cookie = cookie
        self._login_page = login_page
        self._title = title
        self._token_file = token_file
        self._sessions = _Sessions()
        self._failures = _FailureBudget()
        self._hosts = [h.lower() for h in hosts]

    def _login_page_html(self, *, wrong: bool) -> bytes:
        return _login_html(self._title, wrong, self._token_file)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request = _Request(scope)
        if scope["type"] == "http":
            send = _Secured(send, request.method)
        host = self._allowed_host(request)
        if host is None:
            await self._refuse(scope, receive, send, request, 421, "this Host is not served here")
            return
        origin = request.header(b"origin")
        if origin is not None and origin != f"http://{host}":
            await self._refuse(scope, receive, send, request, 403, "cross-origin request")
            return
        if request.header(b"sec-fetch-site") in ("cross-site", "same-site"):
            await self._refuse(scope, receive, send, request, 403, "cross-site request")
            return
        login_paths = ("/login", "/login.css", "/logout")
        if self._login_page and scope["type"] == "http" and request.path in login_paths:
            await self._login_route(request, receive, send, origin)
            return
        verdict = self._authenticate(request, origin)
        if verdict is not None:
            status, message = verdict
            if self._login_page and request.path == "/" and scope["type"] == "http":
                await _respond(send, status, self._login_page_html(wrong=False), "text/html")
                return
            await self._refuse(scope, receive, send, request, status, message)
            return
        shared = SHARED_FILES.get(request.path)
        if shared is not None and scope["type"] == "http" and request.method in ("GET", "HEAD"):
            await _respond(send, 200, *shared)
            return
        await self.app(scope, receive, send)

    def _allowed_host(self, request: _Request) -> str | None:
        """The request's Host when it names this port on loopback, else None."""
        host = request.header(b"host")
        if not host or request.port is None:
            return None
        host = host.lower()
        names = ("127.0.0.1", "localhost", "[::1]", *self._hosts)
        allowed = {name if _has_port(name) else f"{name}:{request.port}" for name in names}
        return host if host in allowed else None

    def _authenticate(self, request: _Request, origin: str | None) -> tuple[int, str] | None:
        """None when the request may pass, else the status and message to refuse it with."""
        bearer = request.bearer()
        if bearer is not None:
            if hmac.compare_digest(bearer.encode(), self._token):
                return None
            return self._wrong_token()
        loading = request.method in ("GET", "HEAD") and not request.is_api
        key = None if loading else request.header(b"x-hearth-key") or ""
        if any(self._sessions.valid(session, key) for session in request.cookies(self._cookie)):
            # a browser sends Origin with every state-changing request: demand it
            if request.method not in ("GET", "HEAD") and origin is None:
                return 403, "a state-changing request needs an Origin"
            return None
        return 401, "sign in or send the access token as a bearer token"

    def _wrong_token(self) -> tuple[int, str]:
        if self._failures.exhausted():
            return 429, "too many wrong tokens; wait a little"
        self._failures.spend()
        return 401, "wrong access token"

    async def _login_route(
        self, request: _Request, receive: Receive, send: Send, origin: str | None
    ) -> None:
        if request.path == "/login.css" and request.method in ("GET", "HEAD"):
            await _respond(send, 200, LOGIN_CSS, "text/css")
        elif request.path == "/login" and request.method in ("GET", "HEAD"):
            await _respond(send, 200, self._login_page_html(wrong=False), "text/html")
        elif request.method != "POST":
            await _respond(send, 405, b"method not allowed", "text/plain", [(b"allow", b"POST")])
        elif origin is None:
            await _respond(send, 403, b"signing in needs an Origin header", "text/plain")
        elif request.path == "/logout":
            for session in request.cookies(self._cookie):
                self._sessions.drop(session)
            await _respond(send, 303, b"", "text/plain", [(b"location", b"/"), self._clear()])
        else:
            await self._login(request, receive, send)

    async def _login(self, request: _Request, receive: Receive, send: Send) -> None:
        content_type = (request.header(b"content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            await _respond(send, 415, b"the login form is urlencoded", "text/plain")
            return
        body = None
        with anyio.move_on_after(LOGIN_READ_S) as reading:
            body = await _read_body(receive, MAX_LOGIN_BODY)
        if reading.cancelled_caught:
            close = [(b"connection", b"close")]
            await _respond(send, 408, b"the login form came too slowly", "text/plain", close)
            return
        if body is None:
            await _respond(send, 413, b"the login form is too large", "text/plain")
            return
        try:
            fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
        except ValueError:  # more fields than a sign-in form has
            await _respond(send, 400, b"the login form has one field, token", "text/plain")
            return
        given = fields.get("token", [""])[0].strip().encode()
        if not hmac.compare_digest(given, self._token):
            status, why = self._wrong_token()
            page = self._login_page_html(wrong=True) if status == 401 else why.encode()
            await _respond(send, status, page, "text/html" if status == 401 else "text/plain")
            return
        session, key = self._sessions.new()
        cookie = f"{self._cookie}={session}; HttpOnly; SameSite=Strict; Path=/".encode()
        location = f"/#key={key}".encode()
        await _respond(
            send, 303, b"", "text/plain", [(b"location", location), (b"set-cookie", cookie)]
        )

    def _clear(self) -> tuple[bytes, bytes]:
        cookie = f"{self._cookie}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        return b"set-cookie", cookie.encode()

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, request: _Request, status: int, why: str
    ) -> None:
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008, "reason": why})
            return
        extra = [(b"www-authenticate", b'Bearer realm="hearth"')] if status == 401 else []
        if request.path.startswith("/v1/") or request.path == "/v1":  # OpenAI's error shape
            error = {
                "message": why,
                "type": "invalid_request_error",
                "param": None,
                "code": _OPENAI_CODES.get(status, "refused"),
            }
            body = json.dumps({"error": error}).encode()
            await _respond(send, status, body, "application/json", extra)
        elif request.is_api:
            code = {401: ErrorCode.REFUSED, 403: ErrorCode.REFUSED, 429: ErrorCode.BUSY}.get(
                status, ErrorCode.INVALID_INPUT
            )
            body = json.dumps({"error": {"code": code.value, "message": why}}).encode()
            await _respond(send, status, body, "application/json", extra)
        else:
            await _respond(send, status, why.encode(), "text/plain", extra)


_OPENAI_CODES = {401: "invalid_api_key", 403: "forbidden", 421: "misdirected_request"}


def _has_port(host: str) -> bool:
    return host.rsplit("]", 1)[-1].count(":") == 1


class _Secured:
    """A `send` that puts `SECURITY_HEADERS` and the cache rule in the response start, in
    place of any the app set."""

    def __init__(self, send: Send, method: str) -> None:
        self._send = send
        self._headers = (*SECURITY_HEADERS, POST_NO_CACHE if method == "POST" else NO_STORE)

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name for name, _ in self._headers}
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
            message = {**message, "headers": [*headers, *self._headers]}
        await self._send(message)


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    kind = f"{content_type}; charset=utf-8".encode()
    start_headers = [
        (b"content-type", kind),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None once it passes `limit` bytes."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def guard(
    app: ASGIApp,
    *,
    token: str,
    cookie: str,
    login_page: bool,
    title: str = "Hearth",
    token_file: Path | None = None,
    hosts: Sequence[str] = (),
) -> ASGIApp:
    """`app` behind the loopback guard: Host and Origin checked on every request, the bearer
    `token` or a session cookie named `cookie` required; with `login_page`, `GET /` without
    a session and `GET /login` show the sign-in form (saying where `token_file` is, and
    how to print it), `POST /login` (field `token`) starts a session and `POST /logout`
    ends it. `hosts` are more Host names accepted (with the port, unless one is given)."""
    return Guard(
        app,
        token=token,
        cookie=cookie,
        login_page=login_page,
        title=title,
        token_file=token_file,
        hosts=hosts,
    )


def _check_free(port: int) -> None:
    """`busy` now when 127.0.0.1:`port` is taken (rather than an OSError from inside the
    server's task group)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise HearthError(
                ErrorCode.BUSY, f"127.0.0.1:{port} is in use ({exc.strerror})"
            ) from exc


async def serve(
    app: ASGIApp, port: int, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve `app` on 127.0.0.1:`port` (0: a free port) with Hypercorn's trio worker until
    cancelled, one line logged per request; `task_status.started` gets the port actually
    bound."""
    app = access_log(app)
    if port:
        _check_free(port)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.errorlog = log
    config.accesslog = None
    config.include_server_header = False
    config.graceful_timeout = 1.0
    # A flood of clients gets answers, not resets: connections wait in the kernel's queue
    # (Linux caps it at net.core.somaxconn; Hypercorn's 100 overflowed at a few hundred, the
    # kernel then resetting them), and an accepted one waits up to this for the loop to
    # read its first request (Hypercorn's idle timer, 5 s by default, closed it unread).
    config.backlog = 4096
    config.keep_alive_timeout = 30.0

    async def _serve(*, task_status: TaskStatus[list[str]]) -> None:
        # starlette's ASGIApp and hypercorn's Framework type the same ASGI callable differently
        await hypercorn_serve(app, config, task_status=task_status)  # type: ignore[arg-type]

    async with anyio.create_task_group() as group:
        binds: list[str] = await group.start(_serve)
        task_status.started(int(binds[0].rsplit(":", 1)[1]))
