"""The local HTTP API: one Starlette app behind the web guard, served on 127.0.0.1.

The guard (`protocol/kit/web/`) answers 421 to a Host other than this port's loopback
names (and `api_hosts`), 403 to a cross-origin `Origin`, 401 without the bearer token
(or the chat page's session), except `GET /health`, which needs no token and says only
that the companion is up; what passes reaches the OpenAI-compatible routes (`/v1`)
or the native ones (`/api`). Hypercorn's trio worker serves it in the caller's event
loop, the one that holds the libp2p host.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from hearth.protocol.kit.web.guard import guard
from hearth.protocol.kit.web.headers import SecurityHeaders
from hearth.protocol.kit.web.host import LoopbackHost
from hearth.protocol.kit.web.loopback import serve
from hearth.protocol.kit.web.origin import SameOrigin
from hearth.protocol.kit.web.token import load_token
from hearth.protocol.wire.errors import ErrorCode, HearthError

from . import native, openai
from .errors import ApiError
from .streams import Slots

if TYPE_CHECKING:
    from ..service import Service

SESSION_COOKIE = "hearth_session"
TOKEN_NAME = "api.token"  # the API's bearer token, in the home


async def _unrouted(request: Request, exc: Exception) -> Response:
    """404 and 405 in the error shape of the API the path belongs to."""
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path[:200]}"
    error = ApiError(exc.status_code, "invalid_input", f"{where}: {exc.detail}")
    if request.url.path.startswith("/v1/"):
        return openai.error_response(error)
    return native.error_response(error)


CHAT_PAGE = Path(__file__).parent.parent / "web"  # the chat page's HTML, CSS and script


async def _chat_page(request: Request) -> Response:
    return FileResponse(CHAT_PAGE / "index.html", media_type="text/html")


HEALTH_PATH = "/health"


async def _health(request: Request) -> Response:
    """The companion is up: nothing else (no version, model or peer id)."""
    return JSONResponse({"status": "ok"})


class WithHealth:
    """`GET /health` answered without the token (as llama-server's), still behind the
    guard's Host and Origin checks and its security headers; every other path goes to
    `guarded`."""

    def __init__(self, guarded: ASGIApp, hosts: Sequence[str] = ()) -> None:
        self.guarded = guarded
        health = Starlette(
            routes=[Route(HEALTH_PATH, _health, methods=["GET"])],
            exception_handlers={HTTPException: _unrouted},
        )
        self.health = SecurityHeaders(LoopbackHost(SameOrigin(health, hosts), hosts))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == HEALTH_PATH:
            await self.health(scope, receive, send)
        else:
            await self.guarded(scope, receive, send)


def build_app(service: Service) -> Starlette:
    """The API's routes over `service`, without the guard."""
    settings = service.settings
    slots = Slots(settings.api_running, settings.api_queue)
    return Starlette(
        routes=[
            *openai.OpenAiApi(service, slots).routes(),
            *native.NativeApi(service, slots).routes(),
            Route("/", _chat_page),
            Mount("/static", StaticFiles(directory=CHAT_PAGE)),
        ],
        exception_handlers={HTTPException: _unrouted},
    )


def api_token(home: Path) -> str:
    """The HTTP API's bearer token in `api.token` (mode 0600), made on first use."""
    try:
        return load_token(home / TOKEN_NAME)
    except ValueError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, str(exc)) from exc


async def serve_api(
    service: Service,
    port: int,
    token: str,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the API on 127.0.0.1:`port` (0: a free one) until cancelled; `task_status`
    gets the port actually bound."""
    hosts = service.settings.api_hosts
    app = guard(
        build_app(service),
        token=token,
        cookie=SESSION_COOKIE,
        login_page=True,
        token_file=service.home / TOKEN_NAME,
        hosts=hosts,
    )
    await serve(WithHealth(app, hosts), port, task_status=task_status)
