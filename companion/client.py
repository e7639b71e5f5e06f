"""The thin client: a `hearth` command's request, through companion.sock when a companion
answers there, else done in this process through `Service`, with the same result.

Import-light: when the companion answers, nothing here loads libp2p or llama.cpp; the
in-process path imports the service only when it is needed.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ValidationError

from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .commands import ReportOp
from .confirm import Confirmation, Confirmer
from .events import (
    AnswerEvent,
    AskRequest,
    ConfirmEvent,
    ErrorEvent,
    EventSink,
)
from .results import AskResult
from .socket_address import GREETING_S, check_owner, not_accepting, reported, stuck
from .socket_messages import (
    MAX_REPLY_LINE,
    REPLIES,
    AskOp,
    CancelOp,
    ConfirmOp,
    Hello,
    Op,
    Reply,
    ResultLine,
    first_problem,
    line_of,
    socket_path,
)

M = TypeVar("M", bound=BaseModel)


def valid(model: type[M], **fields: Any) -> M:
    """`model(**fields)` (a request or an op); `invalid_input` when a value is out of
    bounds (too long, say), as a served command and an in-process one both say."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, first_problem(exc)) from exc


def ask_request(**fields: Any) -> AskRequest:
    """An `AskRequest`, or `invalid_input`."""
    return valid(AskRequest, **fields)


def hearth_error(event: ErrorEvent) -> HearthError:
    """The error a companion reported, as the `HearthError` the command line reports."""
    return reported(event.code, event.message)


class CompanionConnection:
    """One connection to a running companion."""

    def __init__(self, stream: SocketStream) -> None:
        self._stream = stream
        self._lines = BufferedByteReceiveStream(stream)

    async def greeted(self, home: Path) -> None:
        """Wait, bounded, for the companion's `Hello` (or its `busy`)."""
        with anyio.move_on_after(GREETING_S):
            reply = await self.receive()
            if isinstance(reply, ErrorEvent):
                raise hearth_error(reply)
            if not isinstance(reply, Hello):
                raise HearthError(ErrorCode.PROTOCOL_ERROR, f"the companion sent {reply.type}")
            return
        raise stuck(home)

    async def send(self, op: Op) -> None:
        try:
            await self._stream.send(line_of(op))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise HearthError(ErrorCode.UNREACHABLE, "the companion stopped mid-request") from exc

    async def receive(self) -> Reply:
        try:
            line = await self._lines.receive_until(b"\n", MAX_REPLY_LINE)
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            raise HearthError(ErrorCode.UNREACHABLE, "the companion stopped mid-request") from exc
        except anyio.DelimiterNotFound as exc:
            too_long = "the companion sent too long a line"
            raise HearthError(ErrorCode.PROTOCOL_ERROR, too_long) from exc
        try:
            return REPLIES.validate_json(line)
        except ValidationError as exc:
            raise HearthError(
                ErrorCode.PROTOCOL_ERROR, f"the companion sent {first_problem(exc)}"
            ) from exc

    async def call(self, op: ReportOp) -> dict[str, Any]:
        """An op answered with one result: the command's `--json` object."""
        await self.send(op)
        reply = await self.receive()
        if isinstance(reply, ErrorEvent):
            raise hearth_error(reply)
        if reply.type != "result":
            raise HearthError(ErrorCode.INTERNAL, f"the companion answered {reply.type}")
        return reply.result

    async def ask(
        self, request: AskRequest, events: EventSink, confirmer: Confirmer, cancel: anyio.Event
    ) -> AskResult:
        """Stream an ask: events go to `events`, questions to `confirmer` (on this
        terminal), and `cancel` is passed on to the companion (which tells the node)."""
        await self.send(AskOp(request=request))

        async def pass_cancel() -> None:
            await cancel.wait()
            await self.send(CancelOp())

        with single_error():
            async with anyio.create_task_group() as tg:
                tg.start_soon(pass_cancel)
                result = await self._until_answered(events, confirmer)
                tg.cancel_scope.cancel()
        return result

    async def _until_answered(self, events: EventSink, confirmer: Confirmer) -> AskResult:
        """Events to `events` and questions to `confirmer` until the answer (or error)."""
        while True:
            reply = await self.receive()
            if isinstance(reply, AnswerEvent):
                return reply.result
            if isinstance(reply, ErrorEvent):
                raise hearth_error(reply)
            if isinstance(reply, ConfirmEvent):
                approve = await confirmer.confirm(question_of(reply))
                await self.send(ConfirmOp(confirm_id=reply.confirm_id, approve=approve))
            elif not isinstance(reply, ResultLine | Hello):
                await events(reply)


def question_of(event: ConfirmEvent) -> Confirmation:
    """The question a companion relayed, to be asked here."""
    return Confirmation(
        kind=event.kind,
        plan_id=event.plan_id,
        summary=event.summary,
        tool=event.tool,
        arguments=dict(event.arguments),
        tainted=dict(event.tainted),
    )


@asynccontextmanager
async def companion(home: Path) -> AsyncIterator[CompanionConnection | None]:
    """A connection to the companion serving `home`, or None when none listens there;
    `refused` when another user's process serves the socket, `unreachable` when the
    companion does not greet the connection in time."""
    path = socket_path(home)
    try:
        with anyio.fail_after(GREETING_S):  # a listener whose backlog is full accepts nobody
            stream = await anyio.connect_unix(path)
    except TimeoutError:
        raise not_accepting(path) from None
    except OSError:  # no socket, a stale one, or a path too long for a socket
        yield None
        return
    async with stream:
        check_owner(stream.extra(SocketAttribute.raw_socket), path)
        connection = CompanionConnection(stream)
        await connection.greeted(home)
        yield connection


Ask = Callable[[AskRequest, EventSink, Confirmer, anyio.Event], Awaitable[AskResult]]


@asynccontextmanager
async def asking(home: Path) -> AsyncIterator[Ask]:
    """A way to ask, for one request or a whole `hearth chat`: through the companion when
    it answers (a connection per request), else a `Service` kept open in this process."""
    async with companion(home) as connection:
        served = connection is not None
    if served:

        async def over_socket(
            request: AskRequest, events: EventSink, confirmer: Confirmer, cancel: anyio.Event
        ) -> AskResult:
            async with companion(home) as connection:
                if connection is None:
                    raise HearthError(ErrorCode.UNREACHABLE, "the companion has stopped")
                return await connection.ask(request, events, confirmer, cancel)

        yield over_socket
        return
    from .ask import ask
    from .home_lock import command_lock
    from .service import Service

    with command_lock(home):
        async with Service.open(home) as service:
            yield functools.partial(ask, service)


async def call(home: Path, op: ReportOp) -> dict[str, Any]:
    """A reporting op's `--json` object, from the companion when it runs, else in-process."""
    async with companion(home) as connection:
        if connection is not None:
            return await connection.call(op)
    from .commands import perform_here

    return (await perform_here(home, op)).model_dump(mode="json")
