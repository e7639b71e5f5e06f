"""Streamed text from a generating thread to the event loop, handed over in batches:
the first piece at once, then what gathered, at most once per `STREAM_INTERVAL_S`.

Each hand-over costs the token loop GIL hand-overs and the loop a wake-up, and the
text a frame to the phone or an event to the API's client: a token a hand-over cost
more CPU than the tokens' own sampling. A model slower than the interval still hands
over every token as it comes. The generating thread never waits for the loop.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import trio

from hearth.protocol.transport.taskgroups import single_error

STREAM_INTERVAL_S = 0.015
AsyncText = Callable[[str], Awaitable[None]]
Result = TypeVar("Result")


class TextRelay:
    """Text from a generating thread to the event loop, with as few wake-ups as
    possible: the first piece at once, then at most one wake-up per interval."""

    def __init__(self, loop: trio.lowlevel.TrioToken) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[tuple[bool, str]] = []  # (thinking, text)
        self._last = 0.0
        self._send, self.wakeups = anyio.create_memory_object_stream[None](1)

    @classmethod
    def here(cls) -> TextRelay:
        """A relay to the event loop this is called on."""
        return cls(trio.lowlevel.current_trio_token())

    def put_thought(self, piece: str) -> None:  # generating thread
        self.put(piece, thought=True)

    def put(self, piece: str, thought: bool = False) -> None:  # generating thread
        with self._lock:
            self._pending.append((thought, piece))
            now = time.monotonic()
            if now - self._last < STREAM_INTERVAL_S:
                return
            self._last = now
        self._loop.run_sync_soon(self._wake)

    def close(self) -> None:  # generating thread, at the end
        self._loop.run_sync_soon(self._wake)
        self._loop.run_sync_soon(self._send.close)

    def _wake(self) -> None:
        # the session may have ended (its receiver gone) while this was scheduled
        with contextlib.suppress(
            anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            self._send.send_nowait(None)

    def take(self) -> list[tuple[bool, str]]:
        """What came since the last take, as runs of thinking or answer text."""
        with self._lock:
            pending, self._pending = self._pending, []
        return runs(pending)

    async def deliver(self, on_text: AsyncText, on_thinking: AsyncText) -> None:
        """Hand each batch to `on_text` or `on_thinking` (on the loop), in order, until
        the generating thread has closed the relay."""
        async with self.wakeups:
            async for _ in self.wakeups:
                for thought, piece in self.take():
                    await (on_thinking if thought else on_text)(piece)


async def generate_streamed(
    work: Callable[[TextRelay, Callable[[], bool]], Result],
    on_text: AsyncText,
    on_thinking: AsyncText,
    cancel: anyio.Event | None = None,
) -> Result:
    """`work(relay, stopped)` on a worker thread, its text handed to `on_text` and
    `on_thinking` on this loop as it comes; its result once it has returned.

    `stopped()` turns true (for the worker to stop generating) when `cancel` is set,
    when the text has nowhere to go (a sink raised) or when this is cancelled; the
    worker is never abandoned: this returns or raises after it has ended."""
    relay = TextRelay.here()
    stop = threading.Event()
    done: list[Result] = []

    def run_work() -> Result:
        try:
            return work(relay, stop.is_set)
        finally:
            relay.close()

    async def run() -> None:
        done.append(await anyio.to_thread.run_sync(run_work))

    async def watch(event: anyio.Event, scope: anyio.CancelScope) -> None:
        with scope:
            await event.wait()
            stop.set()

    watching = anyio.CancelScope()
    with single_error():
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            if cancel is not None:
                tg.start_soon(watch, cancel, watching)
            try:
                await relay.deliver(on_text, on_thinking)
            finally:
                stop.set()
                watching.cancel()  # the worker has closed the relay: nothing to watch
    return done[0]


def runs(pieces: list[tuple[bool, str]]) -> list[tuple[bool, str]]:
    """(thinking, text) pieces joined into runs of the same kind, in order."""
    joined: list[tuple[bool, str]] = []
    for thought, piece in pieces:
        if joined and joined[-1][0] == thought:
            joined[-1] = (thought, joined[-1][1] + piece)
        else:
            joined.append((thought, piece))
    return joined
