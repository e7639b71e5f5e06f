"""The Origin check: a request another site's page makes is refused (CSRF)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from .host import loopback_host
from .scope import GUARDED, ScopeView, refuse

CROSS_SITE = ("cross-site", "same-site")  # Sec-Fetch-Site values of another site's page


class SameOrigin:
    """403 for a request whose `Origin` is not this server's own (`http://` and its Host)
    or whose `Sec-Fetch-Site` says another site sent it, whatever its method. A request
    without `Origin` passes here (`auth` demands one of a signed-in page's writes)."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str] = ()) -> None:
        self.app = app
        self.hosts = tuple(hosts)  # the Host names `loopback_host` accepts beside loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in GUARDED:
            view = ScopeView(scope)
            origin = view.header(b"origin")
            host = loopback_host(view, self.hosts)
            if origin is not None and (host is None or origin != f"http://{host}"):
                await refuse(view, receive, send, 403, "cross-origin request")
                return
            if view.header(b"sec-fetch-site") in CROSS_SITE:
                await refuse(view, receive, send, 403, "cross-site request")
                return
        await self.app(scope, receive, send)
