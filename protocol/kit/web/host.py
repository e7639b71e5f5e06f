"""The Host check: only this port's loopback names are served (DNS rebinding)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from .scope import GUARDED, ScopeView, refuse

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def loopback_host(view: ScopeView, hosts: Sequence[str] = ()) -> str | None:
    """The request's Host, lowercased, when it is one Host naming this port on loopback
    (or one of `hosts`: with this port, unless one names its own); else None (absent,
    repeated, another name or port, no port, no port served)."""
    host = view.header(b"host")
    if not host or view.port is None:
        return None
    host = host.lower()
    names = (*LOOPBACK_NAMES, *(name.lower() for name in hosts))
    allowed = {name if _has_port(name) else f"{name}:{view.port}" for name in names}
    return host if host in allowed else None


def _has_port(host: str) -> bool:
    return host.rsplit("]", 1)[-1].count(":") == 1


class LoopbackHost:
    """421 for a request whose Host is not `loopback_host`: a page of another site that
    resolves its own name to 127.0.0.1 never reaches the app."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str] = ()) -> None:
        self.app = app
        self.hosts = tuple(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in GUARDED:
            view = ScopeView(scope)
            if loopback_host(view, self.hosts) is None:
                await refuse(view, receive, send, 421, "this Host is not served here")
                return
        await self.app(scope, receive, send)
