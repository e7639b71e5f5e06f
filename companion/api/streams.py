"""Responses that end with their client: work that watches for a hang-up, and
server-sent events; and how many of them may run at once, the rest waiting in order.

A client that hangs up cancels its request: the request's `cancel` event is set (so a
remote plan session tells the node), and what has not ended `GRACE_S` later is cancelled.
A client that stops reading an event stream is cut off after `SEND_TIMEOUT_S`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .errors import ApiError, drain

MAX_RETRY_AFTER_S = 30.0  # long asks never tell a client to stay away for minutes
GRACE_S = 2.0  # after a hang-up, how long a request may take to stop on its own
SEND_TIMEOUT_S = 10.0  # a client that takes no event for this long is hung up on
Emit = Callable[[bytes], Awaitable[None]]


async def until_hangup(receive: Receive, work: Callable[[anyio.Event], Awaitable[None]]) -> bool:
    """Run `work(cancel)` while watching the client; True when it hung up first. `work`
    handles its own errors (it reports them to the client)."""
    cancel = anyio.Event()
    hung_up = False
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            nonlocal hung_up
            while (await receive())["type"] != "http.disconnect":
                pass
            hung_up = True
            cancel.set()
            await anyio.sleep(GRACE_S)
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await work(cancel)
        tg.cancel_scope.cancel()
    return hung_up


class EventStream(Response):
    """`text/event-stream` written by `produce(emit, cancel)` as it goes, once the
    `ticket`'s turn has come (a queued request's client gets its first byte then); the
    ticket is released when the stream ends, however it ends."""

    media_type = "text/event-stream"

    def __init__(
        self,
        produce: Callable[[Emit, anyio.Event], Awaitable[None]],
        ticket: Ticket | None = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.produce = produce
        self.ticket = ticket
        self.init_headers({"Cache-Control": "no-store"})  # no body: no content-length

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stalled = anyio.CancelScope()
        started = False

        async def emit(chunk: bytes) -> None:
            with anyio.move_on_after(SEND_TIMEOUT_S) as waiting:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if waiting.cancelled_caught:  # the client stopped reading: its request ends now
                stalled.cancel()

        async def work(cancel: anyio.Event) -> None:
            nonlocal started
            if self.ticket is not None:
                await self.ticket.turn()
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            started = True
            await self.produce(emit, cancel)

        try:
            with stalled:
                if not await until_hangup(receive, work) and started:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if self.ticket is not None:
                self.ticket.release()


class Deferred(Response):
    """A response decided by `work(cancel)` once the `ticket`'s turn has come, which runs
    while the client is watched; nothing is sent to a client that hung up. The ticket is
    released when the work ends, however it ends."""

    def __init__(
        self, work: Callable[[anyio.Event], Awaitable[Response]], ticket: Ticket | None = None
    ) -> None:
        super().__init__()
        self.work = work
        self.ticket = ticket

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        outcome: list[Response] = []

        async def run(cancel: anyio.Event) -> None:
            try:
                if self.ticket is not None:
                    await self.ticket.turn()
                outcome.append(await self.work(cancel))
            finally:
                if self.ticket is not None:
                    self.ticket.release()

        if not await until_hangup(receive, run) and outcome:
            await outcome[0](scope, receive, send)


class Ticket:
    """One request's place at `Slots`: queued until `turn()` returns, then running;
    `release()` (idempotent) gives the place back and lets the next request in."""

    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        self._called = anyio.Event()
        self._began = 0.0
        self._done = False

    def _run(self) -> None:
        self._began = time.monotonic()
        self._called.set()

    async def turn(self) -> None:
        """Wait until this request may run (those before it in the queue first)."""
        await self._called.wait()

    def release(self) -> None:
        if self._done:
            return
        self._done = True
        self._slots._leave(self, time.monotonic() - self._began if self._called.is_set() else None)


class Slots:
    """At most `running` requests at once over HTTP, up to `waiting` more queued in the
    order they came; one more is refused with `busy` (429, with `Retry-After`)."""

    def __init__(self, running: int, waiting: int) -> None:
        self.running = running
        self.waiting = waiting
        self.active = 0
        self.queue: deque[Ticket] = deque()
        self.held_s = 5.0  # how long a request runs, on average (recent ones count most)

    def enter(self) -> Ticket:
        """A place: running at once when a slot is free, else at the back of the queue;
        `busy` when the queue is full."""
        if self.active + len(self.queue) >= self.running + self.waiting:
            ahead = len(self.queue) + 1
            raise ApiError(
                429,
                "busy",
                f"{self.running} requests are running and {len(self.queue)} waiting: "
                "try again shortly",
                retry_after=min(self.held_s * ahead / self.running, MAX_RETRY_AFTER_S),
            )
        ticket = Ticket(self)
        if self.active < self.running:
            self.active += 1
            ticket._run()
        else:
            self.queue.append(ticket)
        return ticket

    def _leave(self, ticket: Ticket, ran_s: float | None) -> None:
        if ran_s is None:  # left while queued (its client hung up)
            self.queue.remove(ticket)
            return
        self.held_s = 0.8 * self.held_s + 0.2 * ran_s
        if self.queue:
            self.queue.popleft()._run()  # the slot passes straight to the next in line
        else:
            self.active -= 1

    async def admit(self, request: Request) -> Ticket:
        """A place for `request`, taken before its body is read (so the bound holds the
        bodies kept at once too); when the queue is full, `busy` once the body has been
        read and dropped (`drain`)."""
        try:
            return self.enter()
        except ApiError:
            await drain(request)
            raise
