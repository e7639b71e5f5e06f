"""The companion.sock protocol: JSON lines, one typed message a line, both ways.

Client → server: an `Op`: `ask`, `confirm` or `cancel`, or one of the reporting
commands (`status`, `search`, `tools`, `audit`, `conversations`, `inbox`: `commands`).
Server → client: a `Hello` as soon as it accepts the connection (a client bounds its wait
for it: a stuck companion is an error, never a hang), then `Event`s for an ask (tokens,
route, steps, confirmations, then an answer or an error), one `ResultLine` or an
`ErrorEvent` for every other op. Every model forbids unknown fields; a client's line is at
most `MAX_LINE` bytes.
"""

from __future__ import annotations

from typing import Annotated, Literal

from anyio.abc import SocketAttribute, SocketStream
from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from .commands import BaseOp, ReportOp
from .events import AskRequest, ErrorEvent, Event
from .socket_address import MAX_REPLY_LINE, socket_owner, socket_path

__all__ = ["MAX_REPLY_LINE", "socket_path"]  # where the socket is, for its users here

MAX_LINE = 1 << 20  # bytes in one line from a client, newline included


class AskOp(BaseOp):
    op: Literal["ask"] = "ask"
    request: AskRequest


class ConfirmOp(BaseOp):
    op: Literal["confirm"] = "confirm"
    confirm_id: Annotated[str, Field(max_length=64)]
    approve: bool


class CancelOp(BaseOp):
    op: Literal["cancel"] = "cancel"


Op = Annotated[AskOp | ConfirmOp | CancelOp | ReportOp, Field(discriminator="op")]
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
    """The user id of the process at the other end of `stream` (`socket_owner`)."""
    return socket_owner(stream.extra(SocketAttribute.raw_socket))


def line_of(message: BaseModel) -> bytes:
    """`message` as one JSON line."""
    return message.model_dump_json().encode() + b"\n"


def invalid(message: str) -> ErrorEvent:
    return ErrorEvent(code="invalid_input", message=message)


def first_problem(exc: ValidationError, within: tuple[str, ...] = ()) -> str:
    """What is wrong with a message, in one line (never echoing the input); a place inside
    `within` is named from there (an ask's request: `text: …`, as `hearth ask` says it)."""
    err = exc.errors(include_url=False, include_input=False)[0]
    loc = err["loc"]
    if within and tuple(loc[: len(within)]) == within:
        loc = loc[len(within) :]
    where = ".".join(str(p) for p in loc)
    return f"{where}: {err['msg']}" if where else err["msg"]
