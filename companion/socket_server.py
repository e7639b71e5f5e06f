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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import SocketStream, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ValidationError

from hearth.protocol.kit.request_log import Logged, logged
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .ask import ask as asking
from .client_confirm import RelayedConfirmer
from .commands import ReportOp, error_event, failure, internal_error, perform
from .events import CANCEL_GRACE_S, AnswerEvent, AskRequest, ErrorEvent, Event
from .socket_messages import (
    MAX_LINE,
    OPS,
    AskOp,
    CancelOp,
    ConfirmOp,
    Hello,
    Op,
    ResultLine,
    first_problem,
    invalid,
    line_of,
    peer_uid,
)

if TYPE_CHECKING:
    from .service import Service

MAX_CLIENTS = 16
ASK_REQUEST = ("ask", "request")  # where an ask's request sits in an op
IDLE_S = 30.0  # a connection with no request running is closed after this long silent
SEND_TIMEOUT_S = 10.0  # a client that reads nothing for this long is dropped
MAX_SOCKET_PATH = 107  # bytes in a Unix socket's path (sun_path, less its final NUL)

log = logging.getLogger("hearth.companion.socket_server")


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
                await self.send(invalid(first_problem(exc, within=ASK_REQUEST)))
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
            case report:
                self._start(op, lambda r: self._perform(r, report))

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
            result = await asking(self._service, ask, self.send, relay, request.cancel)
            request.logged.route = f"socket ask, {result.route}"
            request.logged.id = result.request_id  # as `hearth ask --json` shows it
            return AnswerEvent(result=result)

        await self._reply(request, answer)

    async def _perform(self, request: _Request, op: ReportOp) -> None:
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
        except Exception as exc:
            reply = error_event(failure(exc))
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
                internal_error()  # logged: one client's trouble never takes the server down
            finally:
                clients -= 1

    try:
        async with listener:
            task_status.started(path)
            await listener.serve(handle)
    finally:
        path.unlink(missing_ok=True)
