"""The daemon's local control socket (`control.sock`, mode 0600): one JSON line in,
one JSON line out. `hearth-node invite`, `status`, `roster` and `revoke` talk to a
running daemon here.

Requests are typed (`ControlRequest`, a union told apart by `op`), and so are the
replies (`ControlReply`); `request` sends one and reads its reply as the type the
caller expects, or the daemon's typed error. Whatever a local
client sends (not JSON, the wrong shape, too long, too slow, or nothing before it
hangs up) gets a typed error or costs nothing: the daemon keeps serving. At most
`MAX_CLIENTS` are served at once; one more is told `busy`.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from anyio.abc import SocketStream, TaskStatus
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .status import NodeStatus

log = logging.getLogger("hearth.control")
CONTROL_SOCKET = "control.sock"
MAX_LINE = 64 * 1024
MAX_CLIENTS = 16
READ_S = 10.0  # a client has this long to send its line
SEND_S = 10.0  # and to take the reply
PeerId = Annotated[str, Field(min_length=1, max_length=128)]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StatusRequest(Request):
    """The node's identity, load, search and peers."""

    op: Literal["status"]


class RoleRequest(Request):
    """Founder: grant or deny a member one role."""

    op: Literal["grant", "deny"]
    peer: PeerId
    role: Annotated[str, Field(max_length=64)]


class RevokeRequest(Request):
    """Founder: remove a member and rotate the swarm key."""

    op: Literal["revoke"]
    peer: PeerId


class InviteRequest(Request):
    """Founder: a one-time pairing invite."""

    op: Literal["invite"]
    role: Annotated[str, Field(max_length=64)] = "phone"  # `phone` or `friend`, checked on use
    grant: Annotated[str, Field(max_length=256)] | None = None
    ttl: Annotated[float, Field(allow_inf_nan=False)] = 600.0  # range checked on use


ControlRequest = Annotated[
    StatusRequest | RoleRequest | RevokeRequest | InviteRequest, Field(discriminator="op")
]
_REQUEST: TypeAdapter[ControlRequest] = TypeAdapter(ControlRequest)


class Reply(BaseModel):
    model_config = ConfigDict(frozen=True)


class RoleReply(Reply):
    """The roster after a grant or deny, and the connected members it reached."""

    version: int
    peer_id: str
    roles: list[str]
    pushed_to: list[str]


class RevokeReply(Reply):
    """The roster and swarm key after a revocation, and how fast the member was cut off."""

    version: int
    revoked: str
    key_id: int
    previous_key_valid_until: float
    cut_off_ms: float
    pushed_to: list[str]


class InviteReply(Reply):
    """A one-time pairing invite: its URI, expiry (unix time) and the inviting node."""

    uri: str
    expires: float
    node: str


ControlReply = NodeStatus | RoleReply | RevokeReply | InviteReply
Handler = Callable[[ControlRequest], Awaitable[ControlReply]]
R = TypeVar("R", bound=BaseModel)


def parse_request(line: bytes) -> ControlRequest:
    """One request line → a typed request; anything else is `invalid_input`."""
    try:
        return _REQUEST.validate_json(line)
    except ValidationError as exc:
        raise _invalid(exc) from None


def control_request(**fields: Any) -> ControlRequest:
    """The request that `fields` (a command's arguments) make; `invalid_input` as the
    daemon would answer, before anything is sent."""
    try:
        return _REQUEST.validate_python(fields)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _invalid(exc: ValidationError) -> HearthError:
    problems = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}"
        for e in exc.errors(include_url=False, include_input=False)[:5]
    )
    return HearthError(ErrorCode.INVALID_INPUT, f"bad control request: {problems}")


async def read_line(client: SocketStream) -> bytes:
    """The client's one line (without waiting for more once it has a newline);
    `invalid_input` past `MAX_LINE`, `timed_out` after `READ_S`."""
    data = b""
    with anyio.fail_after(READ_S):
        while b"\n" not in data:
            try:
                chunk = await client.receive(MAX_LINE)
            except anyio.EndOfStream:
                break
            data += chunk
            if len(data) > MAX_LINE:
                raise HearthError(ErrorCode.INVALID_INPUT, f"control request over {MAX_LINE} bytes")
    return data.split(b"\n", 1)[0]


async def answer(client: SocketStream, handle: Handler) -> bytes:
    """Read, parse and handle one request: the reply line, a typed error for every
    failure but the client's own disappearance (raised, for the caller to drop)."""
    try:
        try:
            line = await read_line(client)
        except TimeoutError:
            raise HearthError(ErrorCode.TIMED_OUT, "no control request line in time") from None
        reply = (await handle(parse_request(line))).model_dump_json()
    except HearthError as exc:
        reply = json.dumps(exc.to_json())
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        raise
    except Exception:
        reply = json.dumps(_internal())
    return reply.encode() + b"\n"


def _internal() -> dict[str, Any]:
    trace = secrets.token_hex(4)
    log.exception("control request failed (trace %s)", trace)
    return HearthError(ErrorCode.INTERNAL, f"internal error (trace {trace})").to_json()


async def serve_control(
    home: Path, handle: Handler, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Answer control requests until cancelled."""
    path = home / CONTROL_SOCKET
    path.unlink(missing_ok=True)
    listener = await anyio.create_unix_listener(path)
    os.chmod(path, 0o600)
    slots = anyio.Semaphore(MAX_CLIENTS)
    task_status.started()

    async def one(client: SocketStream) -> None:
        async with client:
            try:
                if slots.value == 0:
                    busy = HearthError(ErrorCode.BUSY, "too many control clients", retry_after=1)
                    reply = json.dumps(busy.to_json()).encode() + b"\n"
                else:
                    async with slots:
                        reply = await answer(client, handle)
                with anyio.move_on_after(SEND_S):
                    await client.send(reply)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                log.debug("control client went away: %s", exc)  # it costs nothing more

    try:
        async with listener:
            await listener.serve(one)
    finally:
        path.unlink(missing_ok=True)


class _Error(BaseModel):
    """An error reply's body, as `HearthError.to_json` writes it."""

    code: ErrorCode
    message: str
    retry_after: float | None = None


def request(home: Path, message: ControlRequest, reply: type[R], timeout: float = 30.0) -> R:
    """Ask the running daemon; its answer as `reply`, its error raised as sent, and
    `unreachable` when none runs under `home`."""
    path = home / CONTROL_SOCKET
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise HearthError(
                ErrorCode.UNREACHABLE, f"no hearth-node is running with home {home}"
            ) from exc
        sock.sendall(message.model_dump_json().encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(MAX_LINE)
            if not chunk:
                break
            data += chunk
    try:
        got: Any = json.loads(data)
        if isinstance(got, dict) and "error" in got:
            error = _Error.model_validate(got["error"])
            raise HearthError(error.code, error.message, retry_after=error.retry_after)
        return reply.model_validate(got)
    except ValueError as exc:  # not JSON (JSONDecodeError), or not the shape (ValidationError)
        raise HearthError(
            ErrorCode.PROTOCOL_ERROR, f"the daemon's control reply is not a {reply.__name__}"
        ) from exc
