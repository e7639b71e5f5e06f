"""The script and stylesheet every page shares, answered to a GET of its path (package data
of `hearth.protocol`: the companion and the node never import each other)."""

from __future__ import annotations

from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from .scope import respond

STATIC = Path(__file__).resolve().parent.parent.parent / "static"
SHARED_FILES: dict[str, tuple[bytes, str]] = {
    f"/{name}": ((STATIC / name).read_bytes(), kind)
    for name, kind in (("hearth.js", "text/javascript"), ("hearth.css", "text/css"))
}


class SharedFiles:
    """Answers a GET or HEAD of a `SHARED_FILES` path; every other request passes. Placed
    behind the credential check: the files are for signed-in pages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shared = SHARED_FILES.get(scope.get("path", ""))
        if shared is not None and scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            await respond(send, 200, *shared)
            return
        await self.app(scope, receive, send)
