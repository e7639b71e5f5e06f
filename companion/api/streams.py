"""Responses that end with their client: work that watches for a hang-up, and
server-sent events; and how many of them may run at once.

A client that hangs up cancels its request: the request's `cancel` event is set (so a
remote plan session tells the node), and what has not ended `GRACE_S` later is cancelled.
A client that stops reading an event stream is cut off after `SEND_TIMEOUT_S`.
"""

from __future__ import annotations

import time
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
    """`text/event-stream` written by `produce(emit, cancel)` as it goes."""

    media_type = "text/event-stream"

    def __init__(self, produce: Callable[[Emit, anyio.Event], Awaitable[None]]) -> None:
        self.status_code = 200
        self.background = None
        self.produce = produce
        self.init_headers({"Cache-Control": "no-store"})  # no body: no content-length

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        stalled = anyio.CancelScope()

        async def emit(chunk: bytes) -> None:
            with anyio.move_on_after(SEND_TIMEOUT_S) as waiting:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if waiting.cancelled_caught:  # the client stopped reading: its request ends now
                stalled.cancel()

        with stalled:
            if not await until_hangup(receive, lambda cancel: self.produce(emit, cancel)):
                await send({"type": "http.response.body", "body": b"", "more_body": False})


class Deferred(Response):
    """A response decided by `work(cancel)`, which runs while the client is watched;
    nothing is sent to a client that hung up."""

    def __init__(self, work: Callable[[anyio.Event], Awaitable[Response]]) -> None:
        super().__init__()
        self.work = work

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        outcome: list[Response] = []

        async def run(cancel: anyio.Event) -> None:
            outcome.append(await self.work(cancel))

        if not await until_hangup(receive, run) and outcome:
            await outcome[0](scope, receive, send)


class Slots:
    """At most `size` asks at once over HTTP (the model answers one at a time anyway);
    one more is refused with `busy` (429, with `Retry-After`), never queued."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.taken = 0
        self.held_s = 5.0  # how long an ask holds its slot, on average (recent ones count most)

    def take(self) -> Callable[[], None]:
        """A slot, and the function that gives it back; `busy` when none is free."""
        if self.taken >= self.size:
            raise ApiError(
                429,
                "busy",
                f"{self.size} requests are running: try again shortly",
                retry_after=min(self.held_s / self.size, MAX_RETRY_AFTER_S),
            )
        self.taken += 1
        began = time.monotonic()
        returned = False

        def give_back() -> None:
            nonlocal returned
            if not returned:
                returned = True
                self.taken -= 1
                self.held_s = 0.8 * self.held_s + 0.2 * (time.monotonic() - began)

        return give_back

    async def admit(self, request: Request) -> Callable[[], None]:
        """A slot for `request`, taken before its body is read (so the slots bound the
        bodies held at once as they bound the asks); when none is free, `busy` once the
        body has been read and dropped (`drain`)."""
        try:
            return self.take()
        except ApiError:
            await drain(request)
            raise
