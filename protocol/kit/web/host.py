"""The Host check: only this port's loopback names are served (DNS rebinding)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from .scope import GUARDED, ScopeView, refuse

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def loopback_host(view: ScopeView) -> str | None:
    """The request's Host, lowercased, when it is one Host naming this port on loopback;
    else None (absent, repeated, another name or port, no port, no port served)."""
    host = view.header(b"host")
    if not host or view.port is None:
        return None
    host = host.lower()
    return host if host in {f"{name}:{view.port}" for name in LOOPBACK_NAMES} else None


class LoopbackHost:
    """421 for a request whose Host is not `loopback_host`: a page of another site that
    resolves its own name to 127.0.0.1 never reaches the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in GUARDED:
            view = ScopeView(scope)
            if loopback_host(view) is None:
                await refuse(view, receive, send, 421, "this Host is not served here")
                return
        await self.app(scope, receive, send)
