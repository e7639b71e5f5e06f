"""Streamed text handed on in batches: the first piece at once, then what gathered, at
most once per `STREAM_INTERVAL_S` (each hand-over costs a frame to the phone). From a
generating thread: `hearth.protocol.model.relay.TextRelay`."""

from __future__ import annotations

import time

from hearth.protocol.model.relay import STREAM_INTERVAL_S, runs

from . import OnText


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
