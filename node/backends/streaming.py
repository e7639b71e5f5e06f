"""Streamed text handed on in batches: the first piece at once, then what gathered, at
most once per `STREAM_INTERVAL_S` (each hand-over costs a frame to the phone, and from a
generating thread a wake-up of the event loop)."""

from __future__ import annotations

import contextlib
import threading
import time

import anyio
import trio

from . import OnText

STREAM_INTERVAL_S = 0.015


class TextRelay:
    """Text from a generating thread to the event loop, with as few wake-ups as
    possible: the first piece at once, then at most one wake-up per interval. Each
    wake-up costs the token loop GIL hand-overs; a frame costs more than a token."""

    def __init__(self, loop: trio.lowlevel.TrioToken) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[tuple[bool, str]] = []  # (thinking, text)
        self._last = 0.0
        self._send, self.wakeups = anyio.create_memory_object_stream[None](1)

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


def runs(pieces: list[tuple[bool, str]]) -> list[tuple[bool, str]]:
    """(thinking, text) pieces joined into runs of the same kind, in order."""
    joined: list[tuple[bool, str]] = []
    for thought, piece in pieces:
        if joined and joined[-1][0] == thought:
            joined[-1] = (thought, joined[-1][1] + piece)
        else:
            joined.append((thought, piece))
    return joined


class Batches:
    """Streamed pieces handed on as the in-process relay hands them: the first at once,
    then what gathered, at most once per interval (each hand-over is a frame)."""

    def __init__(self, sinks: tuple[OnText, OnText]) -> None:
        self._sinks = sinks  # (answer text, thinking)
        self._pending: list[tuple[bool, str]] = []
        self._last = -STREAM_INTERVAL_S

    async def add(self, piece: str, thought: bool) -> None:
        self._pending.append((thought, piece))
        if time.monotonic() - self._last >= STREAM_INTERVAL_S:
            await self.flush()

    async def flush(self) -> None:
        self._last = time.monotonic()
        pending, self._pending = self._pending, []
        on_text, on_thinking = self._sinks
        for thought, text in runs(pending):
            await (on_thinking if thought else on_text)(text)
