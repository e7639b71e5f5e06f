"""The credential check: the bearer token, or a signed-in session and its key."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from .access import Access
from .login import SignInPage
from .scope import GUARDED, ScopeView, refuse, respond


def verdict(access: Access, view: ScopeView) -> tuple[int, str] | None:
    """None when the request may pass, else the status and message to refuse it with.

    A bearer token is checked alone (wrong ones spend the budget). A session cookie passes
    with its key in `X-Hearth-Key` (a plain page or file load needs no key), and a write
    needs an `Origin` too: a browser always sends one with a state-changing request."""
    bearer = view.bearer()
    if bearer is not None:
        return None if access.is_token(bearer) else access.wrong_token()
    key = None if view.is_load else view.header(b"x-hearth-key") or ""
    if any(access.sessions.valid(session, key) for session in view.cookies(access.cookie)):
        if view.method not in ("GET", "HEAD") and view.header(b"origin") is None:
            return 403, "a state-changing request needs an Origin"
        return None
    return 401, "sign in or send the access token as a bearer token"


class SessionOrBearer:
    """Refuses a request `verdict` refuses (401, 403 or 429); with a sign-in `page`, a
    request for `/` is answered with the sign-in form instead (same status)."""

    def __init__(self, app: ASGIApp, access: Access, page: SignInPage | None = None) -> None:
        self.app = app
        self.access = access
        self.page = page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in GUARDED:
            view = ScopeView(scope)
            refused = verdict(self.access, view)
            if refused is not None:
                status, why = refused
                if self.page is not None and view.is_http and view.path == "/":
                    await respond(send, status, self.page.html(wrong=False), "text/html")
                else:
                    await refuse(view, receive, send, status, why)
                return
        await self.app(scope, receive, send)
