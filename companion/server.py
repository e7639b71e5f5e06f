"""The companion.sock server: the `hearth` commands' way into a running companion.

A Unix socket under the home (mode 0600, and only the companion's own user is served,
by the peer's credentials) speaking JSON lines (`socket_messages`). Each
connection runs at most one request at a time; while an ask runs, the client may answer
its confirmations or cancel it. What a client can do to the server is bounded: at most
`MAX_CLIENTS` connections, lines of at most `MAX_LINE` bytes, a malformed line answered
with `invalid_input`, an idle connection closed after `IDLE_S`, a client that stops
reading dropped after `SEND_TIMEOUT_S`, and a client that hangs up cancels its request
(the node is told, as on Ctrl-C) and leaves nothing behind.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import SocketStream, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ValidationError

from hearth.protocol.console import storage_problem
from hearth.protocol.request_log import Logged, logged
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .events import AnswerEvent, AskRequest, ErrorEvent, Event
from .relay import RelayedConfirmer
from .socket_messages import (
    MAX_LINE,
    OPS,
    AskOp,
    AuditOp,
    CancelOp,
    ConfirmOp,
    ConversationsOp,
    Hello,
    InboxOp,
    Op,
    ResultLine,
    SearchOp,
    StatusOp,
    ToolsOp,
    first_problem,
    invalid,
    line_of,
    peer_uid,
)

if TYPE_CHECKING:
    from .service import Service

MAX_CLIENTS = 16
IDLE_S = 30.0  # a connection with no request running is closed after this long silent
SEND_TIMEOUT_S = 10.0  # a client that reads nothing for this long is dropped
MAX_SOCKET_PATH = 107  # bytes in a Unix socket's path (sun_path, less its final NUL)
CANCEL_GRACE_S = 0.5  # after a cancel, for the node to hear it before the request is cut off

log = logging.getLogger("hearth.companion.server")


async def perform(service: Service, op: Op) -> BaseModel:
    """The result of an op other than ask/confirm/cancel: the command's `--json` model.
    The thin client's in-process fallback calls this too, so both paths answer alike."""
    match op:
        case StatusOp():
            return await service.status()
        case SearchOp(query=query, hops=hops, limit=limit):
            return await service.search(query, hops, limit)
        case ToolsOp():
            return service.tools()
        case AuditOp(verify=verify):
            return service.audit(verify)
        case ConversationsOp(id=None, all=everyone):
            return service.conversations.summaries(everyone)
        case ConversationsOp(id=str(conversation_id)):
            return service.conversations.detail(conversation_id)
        case InboxOp():
            return service.inbox.view()
    raise HearthError(ErrorCode.INVALID_INPUT, f"{op.op} is not a request")


def error_event(exc: HearthError) -> ErrorEvent:
    return ErrorEvent(code=exc.code.value, message=exc.message)


def internal_error() -> ErrorEvent:
    trace = secrets.token_hex(4)
    log.exception("internal error (trace %s)", trace)
    return ErrorEvent(code="internal", message=f"internal error (trace {trace})")


class Connection:
    """One client: its ops read line by line, at most one request running at a time."""

    def __init__(self, service: Service, stream: SocketStream) -> None:
        self._service = service
        self._stream = stream
        self._lines = BufferedByteReceiveStream(stream)
        self._send_lock = anyio.Lock()
        self._idle = anyio.CancelScope()
        self._request: _Request | None = None
        self._gone = False

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tasks = tg
            await self.send(Hello(pid=os.getpid()))
            await self._read_ops()
            await self._hang_up()

    async def _hang_up(self) -> None:
        """End the connection; a request still running is cancelled as on Ctrl-C."""
        if self._request is not None:
            await self._request.stop()
        self._tasks.cancel_scope.cancel()

    async def _read_ops(self) -> None:
        while True:
            busy = self._request is not None
            self._idle.deadline = math.inf if busy else anyio.current_time() + IDLE_S
            with self._idle:
                try:
                    line = await self._lines.receive_until(b"\n", MAX_LINE)
                except anyio.DelimiterNotFound:
                    await self.send(invalid(f"a line is at most {MAX_LINE} bytes"))
                    return
                except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                    return
            if self._idle.cancelled_caught:
                return
            self._idle = anyio.CancelScope()
            try:
                op = OPS.validate_json(line)
            except ValidationError as exc:
                await self.send(invalid(first_problem(exc)))
                continue
            await self._dispatch(op)

    async def _dispatch(self, op: Op) -> None:
        request = self._request
        match op:
            case ConfirmOp(confirm_id=confirm_id, approve=approve):
                if request is not None and request.relay is not None:
                    request.relay.answer(confirm_id, approve)  # a late answer is no answer
            case CancelOp():
                if request is not None:
                    self._tasks.start_soon(request.stop)
            case _ if request is not None:
                await self.send(invalid("one request at a time on a connection"))
            case AskOp(request=ask):
                self._start(op, lambda r: self._ask(r, ask))
            case _:
                self._start(op, lambda r: self._perform(r, op))

    def _start(self, op: Op, work: Callable[[_Request], Awaitable[None]]) -> None:
        request = _Request(Logged(f"socket {op.op}"))

        async def run() -> None:
            try:
                with logged(request.logged), request.scope:
                    await work(request)
            finally:
                self._request = None
                self._idle.deadline = anyio.current_time() + IDLE_S

        self._request = request
        self._tasks.start_soon(run)

    async def _ask(self, request: _Request, ask: AskRequest) -> None:
        relay = request.relay = RelayedConfirmer(self.send)

        async def answer() -> AnswerEvent:
            result = await self._service.ask(ask, self.send, relay, request.cancel)
            request.logged.route = f"socket ask, {result.route}"
            request.logged.id = result.request_id  # as `hearth ask --json` shows it
            return AnswerEvent(result=result)

        await self._reply(request, answer)

    async def _perform(self, request: _Request, op: Op) -> None:
        async def result() -> ResultLine:
            model = await perform(self._service, op)
            return ResultLine(result=model.model_dump(mode="json"))

        await self._reply(request, result)

    async def _reply(self, request: _Request, work: Callable[[], Awaitable[BaseModel]]) -> None:
        """Send what `work` returns, or the error it raised, as one line (its outcome
        noted for the request log)."""
        try:
            with single_error():
                reply: BaseModel = await work()
        except HearthError as exc:
            reply = error_event(exc)
        except (OSError, sqlite3.OperationalError) as exc:  # as the in-process command says
            problem = storage_problem(exc)
            reply = internal_error() if problem is None else error_event(problem)
        except Exception:
            reply = internal_error()
        if isinstance(reply, ErrorEvent):
            request.logged.outcome = reply.code
        await self.send(reply)

    async def send(self, message: Event | BaseModel) -> None:
        """One line to the client; a client that does not take it in time is hung up on."""
        if self._gone:
            return
        try:
            async with self._send_lock:
                with anyio.fail_after(SEND_TIMEOUT_S):
                    await self._stream.send(line_of(message))
        except (TimeoutError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._gone = True  # the client is gone (or stopped reading): so is its request
            self._tasks.start_soon(self._hang_up)


class _Request:
    """A request running on a connection: how to cancel it, and its open questions."""

    def __init__(self, entry: Logged) -> None:
        self.scope = anyio.CancelScope()
        self.cancel = anyio.Event()
        self.relay: RelayedConfirmer | None = None
        self.logged = entry  # its line in the request log

    async def stop(self) -> None:
        """Tell the request to stop (the node hears it), then cut it off after a grace."""
        self.cancel.set()
        await anyio.sleep(CANCEL_GRACE_S)
        self.scope.cancel()


def check_socket_path(path: Path) -> None:
    """`invalid_input` when `path` is too long to bind a Unix socket at."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise HearthError(
            ErrorCode.INVALID_INPUT,
            f"{path} is too long for a Unix socket ({MAX_SOCKET_PATH} bytes at most): "
            "use a shorter --home",
        )


async def serve_socket(
    service: Service, path: Path, *, task_status: TaskStatus[Path] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve companion.sock at `path` until cancelled. The caller holds the home's
    instance lock, so a socket file already there is a stale one."""
    check_socket_path(path)
    path.unlink(missing_ok=True)
    listener = await anyio.create_unix_listener(path)
    os.chmod(path, 0o600)
    clients = 0

    async def handle(stream: SocketStream) -> None:
        nonlocal clients
        async with stream:
            if (uid := peer_uid(stream)) != os.getuid():  # whatever the socket's mode says
                log.warning("refused a companion.sock client of user %d", uid)
                return
            if clients >= MAX_CLIENTS:
                with anyio.move_on_after(1):
                    await stream.send(
                        line_of(ErrorEvent(code="busy", message=f"at most {MAX_CLIENTS} clients"))
                    )
                return
            clients += 1
            try:
                await Connection(service, stream).run()
            except Exception:
                internal_error()  # one client's trouble never takes the server down
            finally:
                clients -= 1

    try:
        async with listener:
            task_status.started(path)
            await listener.serve(handle)
    finally:
        path.unlink(missing_ok=True)
