"""The companion.sock protocol: JSON lines, one typed message a line, both ways.

Client → server: an `Op` (`ask`, `confirm`, `cancel`, `status`, `search`, `tools`,
`audit`, `conversations`, `inbox`). Server → client: a `Hello` as soon as it accepts
the connection (a client bounds its wait for it: a stuck companion is an error, never a
hang), then `Event`s for an ask (tokens,
route, steps, confirmations, then an answer or an error), one `ResultLine` or an
`ErrorEvent` for every other op. Every model forbids unknown fields; a client's line is at most
`MAX_LINE` bytes. Light to import: the thin client loads it on every command.
"""

from __future__ import annotations

import socket
import struct
from typing import Annotated, Literal

from anyio.abc import SocketAttribute, SocketStream
from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from .events import AskRequest, ErrorEvent, Event

SOCKET_NAME = "companion.sock"
MAX_LINE = 1 << 20  # bytes in one line from a client, newline included
# bytes in one line from the companion (the user's own process, checked by uid): a report
# such as `hearth audit` grows with the home, and must read as it does in-process
MAX_REPLY_LINE = 1 << 28


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AskOp(_Op):
    op: Literal["ask"] = "ask"
    request: AskRequest


class ConfirmOp(_Op):
    op: Literal["confirm"] = "confirm"
    confirm_id: Annotated[str, Field(max_length=64)]
    approve: bool


class CancelOp(_Op):
    op: Literal["cancel"] = "cancel"


class StatusOp(_Op):
    op: Literal["status"] = "status"


class SearchOp(_Op):
    op: Literal["search"] = "search"
    query: Annotated[str, Field(min_length=1, max_length=4096)]
    hops: Annotated[int, Field(ge=2, le=3)] = 2
    limit: Annotated[int, Field(ge=1, le=50)] = 10


class ToolsOp(_Op):
    op: Literal["tools"] = "tools"


class AuditOp(_Op):
    op: Literal["audit"] = "audit"
    verify: bool = False


class ConversationsOp(_Op):
    op: Literal["conversations"] = "conversations"
    id: Annotated[str | None, Field(max_length=128)] = None
    all: bool = False  # apps' API requests too (`--all`)


class InboxOp(_Op):
    op: Literal["inbox"] = "inbox"


Op = Annotated[
    AskOp
    | ConfirmOp
    | CancelOp
    | StatusOp
    | SearchOp
    | ToolsOp
    | AuditOp
    | ConversationsOp
    | InboxOp,
    Field(discriminator="op"),
]
OPS: TypeAdapter[Op] = TypeAdapter(Op)


class Hello(BaseModel):
    """The server's first line: it is serving (`pid`: the companion's process)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["hello"] = "hello"
    pid: int


class ResultLine(BaseModel):
    """The answer to an op other than `ask`: the command's `--json` object."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["result"] = "result"
    result: dict[str, JsonValue]


Reply = Annotated[Event | ResultLine | Hello, Field(discriminator="type")]
REPLIES: TypeAdapter[Reply] = TypeAdapter(Reply)


def peer_uid(stream: SocketStream) -> int:
    """The user id of the process at the other end of a Unix socket (`SO_PEERCRED`): both
    ends talk only to their own user, whatever the socket's mode or path says."""
    raw = stream.extra(SocketAttribute.raw_socket)
    pid_uid_gid = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", pid_uid_gid)[1]
    return uid


def line_of(message: BaseModel) -> bytes:
    """`message` as one JSON line."""
    return message.model_dump_json().encode() + b"\n"


def invalid(message: str) -> ErrorEvent:
    return ErrorEvent(code="invalid_input", message=message)


def first_problem(exc: ValidationError) -> str:
    """What is wrong with a message, in one line (never echoing the input)."""
    err = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]
