"""The loopback guard: one middleware per job, in the order each must see a request.

Only this machine's browser tabs and clients holding the token reach the app: a Host
other than this port's loopback names is 421 (DNS rebinding), another site's `Origin` is
403 on every request (CSRF), and a request without the bearer token or a session from
`POST /login` is 401. Every HTTP answer carries a strict Content-Security-Policy; past the
guard, `/hearth.js` and `/hearth.css` are the script and stylesheet both pages share.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from starlette.types import ASGIApp

from .access import Access
from .auth import SessionOrBearer
from .files import SharedFiles
from .headers import SecurityHeaders
from .host import LoopbackHost
from .login import LoginForm, SignInPage
from .origin import SameOrigin


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
    access = Access(token, cookie)
    page = SignInPage(title, token_file) if login_page else None
    inner: ASGIApp = SessionOrBearer(SharedFiles(app), access, page)
    if page is not None:
        inner = LoginForm(inner, access, page)
    return SecurityHeaders(LoopbackHost(SameOrigin(inner, hosts), hosts))
