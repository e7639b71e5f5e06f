"""Security headers on every HTTP answer, the guard's own refusals included."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


class SecurityHeaders:
    """Puts `SECURITY_HEADERS` and the cache rule in every HTTP answer's start, in place of
    any the app set (a laxer policy of its own does not survive)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        headers = (*SECURITY_HEADERS, POST_NO_CACHE if method == "POST" else NO_STORE)
        names = {name for name, _ in headers}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *headers]}
            await send(message)

        await self.app(scope, receive, secured)
