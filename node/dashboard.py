"""The node's dashboard: a page on 127.0.0.1:`dashboard_port` behind the web guard
(token in `dashboard.token`), showing what `hearth-node status` shows and letting the
owner grant, deny and revoke members and pair a device from a QR code.

Its JSON endpoints answer through the daemon's control handler, the very code the
control socket runs: `GET /api/status`, and `POST /api/grant`, `/api/deny`,
`/api/revoke` and `/api/invite` (their Origin is checked by the guard). An invite's QR
code is served as an SVG image under a random, short-lived path outside `/api` (an
`<img>` sends no session key; the path is the secret), so the page's strict CSP needs
no `data:` images and the invite's token never sits in a URL.
"""

from __future__ import annotations

import io
import logging
import secrets
import time
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import segno
from anyio.abc import TaskStatus
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hearth.protocol.web import HTTP_STATUS, guard, load_token, serve
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .control import (
    ControlRequest,
    Handler,
    InviteReply,
    InviteRequest,
    PeerId,
    RevokeRequest,
    RoleRequest,
    StatusRequest,
)

log = logging.getLogger("hearth.dashboard")
DASHBOARD_TOKEN = "dashboard.token"
SESSION_COOKIE = "hearth_dashboard"
WEB = Path(__file__).parent / "web"
INVITE_TTL_S = 600.0
MAX_BODY = 4096
MAX_QR_CODES = 8  # QR images kept at once (one per invite shown, dropped at expiry)
QR_BORDER = 4  # modules of quiet zone
M = TypeVar("M", bound=BaseModel)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoleBody(Body):
    """Grant or deny `peer` one `role`."""

    peer: PeerId
    role: Annotated[str, Field(max_length=64)]


class PeerBody(Body):
    """Revoke `peer`."""

    peer: PeerId


class InviteBody(Body):
    """Create a one-time invite for a phone or a friend's node."""

    role: Literal["phone", "friend"] = "phone"


class InviteView(BaseModel):
    """An invite as the page shows it: the URI, its QR image and seconds left."""

    uri: str
    qr: str
    expires_in: float


def qr_svg(uri: str) -> bytes:
    """`uri` as an SVG QR code with a quiet zone of `QR_BORDER` modules."""
    out = io.BytesIO()
    segno.make(uri, error="m").save(
        out,
        kind="svg",
        border=QR_BORDER,
        xmldecl=False,
        omitsize=True,
        light="#fff",
        title="Pairing QR code",
    )
    return out.getvalue()


class Dashboard:
    """The dashboard's routes over the daemon's control handler."""

    def __init__(self, control: Handler, name: str) -> None:
        self._control = control
        self._name = name
        self._qr: dict[str, tuple[float, bytes]] = {}

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self._index),
                Mount("/static", StaticFiles(directory=WEB)),
                Route("/api/status", self._status),
                Route("/api/grant", self._grant, methods=["POST"]),
                Route("/api/deny", self._deny, methods=["POST"]),
                Route("/api/revoke", self._revoke, methods=["POST"]),
                Route("/api/invite", self._invite, methods=["POST"]),
                Route("/qr/{key}", self._qr_image),
            ]
        )

    async def _index(self, request: Request) -> Response:
        return FileResponse(WEB / "index.html", media_type="text/html")

    async def _status(self, request: Request) -> Response:
        return await self._answer(StatusRequest(op="status"), {"name": self._name})

    async def _grant(self, request: Request) -> Response:
        return await self._role(request, "grant")

    async def _deny(self, request: Request) -> Response:
        return await self._role(request, "deny")

    async def _role(self, request: Request, op: Literal["grant", "deny"]) -> Response:
        try:
            body = await _typed_body(request, RoleBody)
        except HearthError as exc:
            return _error(exc)
        return await self._answer(RoleRequest(op=op, peer=body.peer, role=body.role))

    async def _revoke(self, request: Request) -> Response:
        try:
            body = await _typed_body(request, PeerBody)
        except HearthError as exc:
            return _error(exc)
        return await self._answer(RevokeRequest(op="revoke", peer=body.peer))

    async def _invite(self, request: Request) -> Response:
        try:
            body = await _typed_body(request, InviteBody)
            reply = await self._control(
                InviteRequest(op="invite", role=body.role, ttl=INVITE_TTL_S)
            )
        except HearthError as exc:
            return _error(exc)
        assert isinstance(reply, InviteReply)  # the control handler's answer to an invite
        now = time.time()
        self._qr = {k: v for k, v in self._qr.items() if v[0] > now}
        while len(self._qr) >= MAX_QR_CODES:
            del self._qr[next(iter(self._qr))]
        key = secrets.token_urlsafe(16)
        self._qr[key] = (reply.expires, qr_svg(reply.uri))
        view = InviteView(uri=reply.uri, qr=f"/qr/{key}", expires_in=max(0.0, reply.expires - now))
        return JSONResponse(view.model_dump(mode="json"))

    async def _qr_image(self, request: Request) -> Response:
        held = self._qr.get(request.path_params["key"])
        if held is None or held[0] <= time.time():
            return _error(HearthError(ErrorCode.INVALID_INPUT, "no such invite (expired?)"))
        return Response(held[1], media_type="image/svg+xml")

    async def _answer(
        self, request: ControlRequest, extra: dict[str, Any] | None = None
    ) -> Response:
        try:
            reply = await self._control(request)
        except HearthError as exc:
            return _error(exc)
        return JSONResponse({**reply.model_dump(mode="json"), **(extra or {})})


def _error(exc: HearthError) -> JSONResponse:
    return JSONResponse(exc.to_json(), status_code=HTTP_STATUS[exc.code])


async def _typed_body(request: Request, model: type[M]) -> M:
    """The JSON body as `model`, at most `MAX_BODY` bytes; `invalid_input` otherwise."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise HearthError(ErrorCode.INVALID_INPUT, "the body must be application/json")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise HearthError(ErrorCode.INVALID_INPUT, f"body over {MAX_BODY} bytes")
    except ClientDisconnect as exc:
        raise HearthError(ErrorCode.CANCELLED, "the client went away") from exc
    try:
        return model.model_validate_json(bytes(body))
    except ValidationError as exc:
        err = exc.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(part) for part in err["loc"]) or "body"
        raise HearthError(ErrorCode.INVALID_INPUT, f"{where}: {err['msg']}"[:300]) from None


async def serve_dashboard(
    home: Path,
    port: int,
    control: Handler,
    name: str = "",
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the dashboard on 127.0.0.1:`port` until cancelled; `task_status` gets the
    port, once listening. The token is `dashboard.token` under `home` (made on first use)."""
    token = load_token(home / DASHBOARD_TOKEN)
    app = guard(
        Dashboard(control, name).app(), token=token, cookie=SESSION_COOKIE, login_page=True,
        title="Hearth node", token_file=home / DASHBOARD_TOKEN,
    )  # fmt: skip
    await serve(app, port, task_status=task_status)
