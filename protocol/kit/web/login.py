"""The sign-in form: `GET /login` shows it, `POST /login` (field `token`) starts a session,
`POST /logout` ends it. Signing in needs an `Origin` (login CSRF); the form's body is
small, urlencoded and arrives in time (slowloris), and wrong tokens spend the budget."""

from __future__ import annotations

import html
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from .access import Access
from .scope import ScopeView, respond

LOGIN_PATHS = ("/login", "/login.css", "/logout")
MAX_LOGIN_BODY = 4096  # bytes of the login form
LOGIN_READ_S = 10.0  # the login form's body arrives within this, else 408 (slowloris)
LOGIN_CSS = b"""body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f4ef;color:#222}
main{max-width:22rem;margin:15vh auto;padding:1.5rem;background:#fff;border-radius:.5rem;
box-shadow:0 1px 4px #0002}h1{margin-top:0;font-size:1.4rem}label{display:block;margin-bottom:.3rem}
input{box-sizing:border-box;width:100%;padding:.5rem;font:inherit;margin-bottom:1rem}
button{padding:.5rem 1.2rem;font:inherit}[role=alert]{color:#a00;font-weight:600}
#token-help{color:#5d574f;font-size:.9rem;overflow-wrap:anywhere}
"""
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class SignInPage:
    """The sign-in page: the app's `title`, and where its token is kept (`token_file`,
    named with the command that prints it, when given)."""

    title: str
    token_file: Path | None = None

    def html(self, *, wrong: bool) -> bytes:
        """The page (`wrong`: after a wrong token)."""
        alert = '<p role="alert">Wrong token</p>' if wrong else ""
        name = html.escape(self.title)
        where = (
            ""
            if self.token_file is None
            else '<p id="token-help">The token is in the file '
            f"<code>{html.escape(str(self.token_file))}</code> on this computer; "
            f"<code>cat {html.escape(shlex.quote(str(self.token_file)))}</code> prints it.</p>"
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


class LoginForm:
    """Answers `LOGIN_PATHS` itself (HTTP only); every other request passes."""

    def __init__(self, app: ASGIApp, access: Access, page: SignInPage) -> None:
        self.app = app
        self.access = access
        self.page = page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") not in LOGIN_PATHS:
            await self.app(scope, receive, send)
            return
        view = ScopeView(scope)
        if view.path == "/login.css" and view.method in ("GET", "HEAD"):
            await respond(send, 200, LOGIN_CSS, "text/css")
        elif view.path == "/login" and view.method in ("GET", "HEAD"):
            await respond(send, 200, self.page.html(wrong=False), "text/html")
        elif view.method != "POST":
            await respond(send, 405, b"method not allowed", "text/plain", [(b"allow", b"POST")])
        elif view.header(b"origin") is None:
            await respond(send, 403, b"signing in needs an Origin header", "text/plain")
        elif view.path == "/logout":
            for session in view.cookies(self.access.cookie):
                self.access.sessions.drop(session)
            cleared = (b"set-cookie", self.access.cleared_cookie())
            await respond(send, 303, b"", "text/plain", [(b"location", b"/"), cleared])
        else:
            await self._login(view, receive, send)

    async def _login(self, view: ScopeView, receive: Receive, send: Send) -> None:
        content_type = (view.header(b"content-type") or "").split(";")[0].strip().lower()
        if content_type != FORM:
            await respond(send, 415, b"the login form is urlencoded", "text/plain")
            return
        body = None
        with anyio.move_on_after(LOGIN_READ_S) as reading:
            body = await read_body(receive, MAX_LOGIN_BODY)
        if reading.cancelled_caught:
            close = [(b"connection", b"close")]
            await respond(send, 408, b"the login form came too slowly", "text/plain", close)
            return
        if body is None:
            await respond(send, 413, b"the login form is too large", "text/plain")
            return
        try:
            fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
        except ValueError:  # more fields than a sign-in form has
            await respond(send, 400, b"the login form has one field, token", "text/plain")
            return
        if not self.access.is_token(fields.get("token", [""])[0].strip()):
            status, why = self.access.wrong_token()
            if status == 401:
                await respond(send, 401, self.page.html(wrong=True), "text/html")
            else:
                await respond(send, status, why.encode(), "text/plain")
            return
        session, key = self.access.sessions.new()
        location = (b"location", f"/#key={key}".encode())
        cookie = (b"set-cookie", self.access.session_cookie(session))
        await respond(send, 303, b"", "text/plain", [location, cookie])


async def read_body(receive: Receive, limit: int) -> bytes | None:
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
