"""What the guard's middleware read of an HTTP or WebSocket scope, and how they answer."""

from __future__ import annotations

import json

from starlette.types import Receive, Scope, Send

from hearth.protocol.wire.errors import ErrorCode

GUARDED = ("http", "websocket")  # scope types the guard checks; others pass (lifespan)
# a refusal's code in an API's JSON error, by status (anything else: invalid_input)
REFUSAL_CODES = {401: ErrorCode.REFUSED, 403: ErrorCode.REFUSED, 429: ErrorCode.BUSY}
# ...and in the OpenAI-compatible API's (anything else: refused)
OPENAI_CODES = {401: "invalid_api_key", 403: "forbidden", 421: "misdirected_request"}


class ScopeView:
    """One request as the guard reads it: method, path, port served and headers."""

    def __init__(self, scope: Scope) -> None:
        self.kind: str = scope["type"]
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
        """The bearer token sent; None without `Authorization`, "" for another scheme."""
        auth = self.header(b"authorization")
        if auth is None:
            return None
        scheme, _, value = auth.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else ""

    @property
    def is_http(self) -> bool:
        return self.kind == "http"

    @property
    def is_api(self) -> bool:
        return self.path == "/api" or self.path.startswith(("/api/", "/v1/")) or self.path == "/v1"

    @property
    def is_load(self) -> bool:
        """A plain page or file load (GET/HEAD outside the APIs)."""
        return self.method in ("GET", "HEAD") and not self.is_api


async def respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """A whole HTTP answer."""
    kind = f"{content_type}; charset=utf-8".encode()
    start_headers = [
        (b"content-type", kind),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body})


async def refuse(view: ScopeView, receive: Receive, send: Send, status: int, why: str) -> None:
    """Refuse the request: a WebSocket is closed (1008); an API answers its JSON error (the
    OpenAI-compatible one in OpenAI's shape), a page plain text; a 401 names the bearer
    scheme."""
    if view.kind == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008, "reason": why})
        return
    extra = [(b"www-authenticate", b'Bearer realm="hearth"')] if status == 401 else []
    if view.path.startswith("/v1/") or view.path == "/v1":  # OpenAI's error shape
        error = {
            "message": why,
            "type": "invalid_request_error",
            "param": None,
            "code": OPENAI_CODES.get(status, "refused"),
        }
        body = json.dumps({"error": error}).encode()
        await respond(send, status, body, "application/json", extra)
    elif view.is_api:
        code = REFUSAL_CODES.get(status, ErrorCode.INVALID_INPUT)
        body = json.dumps({"error": {"code": code.value, "message": why}}).encode()
        await respond(send, status, body, "application/json", extra)
    else:
        await respond(send, status, why.encode(), "text/plain", extra)
