"""The answer as it streams in: a transient view on stderr that the final answer replaces,
so a terminal shows each answer once, and a tool call streams as nothing (its step is
listed when it has run). From the first token on, the view says the model has begun
("…", "thinking…") until the answer's first visible text replaces it. When stderr is not
a terminal nothing streams: the answer is printed once, at the end. Text from the model
is shown plain (`plain`), never as markup.

rich loads with the first piece shown, not before: the thin client imports this module.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from hearth.protocol.kit.console import plain
from hearth.protocol.model.prose import ProseOnly

from .confirm import Confirmation, Confirmer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from .events import Event


def _maybe_terminal() -> bool:
    """False when rich would surely say stderr is no terminal (no tty, nothing forcing
    one): then rich need not load to be asked."""
    return (
        sys.stderr.isatty()
        or bool(os.environ.get("TTY_COMPATIBLE"))
        or bool(os.environ.get("FORCE_COLOR"))
    )


class StreamingAnswer:
    """The answer as it streams on stderr: on a terminal, a transient view that `pause()`
    takes off the screen (for a question, or the final answer); elsewhere nothing (a log
    or a script gets the answer once, at the end)."""

    REFRESH_S = 0.1

    def __init__(self, console: Console | None = None) -> None:
        self._console = console
        self._streams: bool | None = None  # decided on the first piece
        self._prose = ProseOnly()
        self._text = ""
        self._live: Live | None = None
        self._drawn = 0.0

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True)
        return self._console

    def _streaming(self) -> bool:
        if self._streams is None:
            self._streams = (
                self._console is not None or _maybe_terminal()
            ) and self.console.is_terminal
        return self._streams

    def put(self, piece: str) -> None:
        """A piece of the answer (on a terminal, shown; elsewhere, nothing)."""
        if not self._streaming():  # a log or a script: the answer once, at the end
            return
        self._begin("…")
        self._text += self._prose.feed(piece)
        if self._text.strip() and time.monotonic() - self._drawn >= self.REFRESH_S:
            assert self._live is not None
            self._live.update(self._tail(), refresh=True)
            self._drawn = time.monotonic()

    def thinking(self) -> None:
        """A piece of the model's thinking: not shown, but on a terminal the person sees
        that the model has begun."""
        if self._streaming():
            self._begin("thinking…")

    def _begin(self, waiting: str) -> None:
        """With the first piece, the view appears, saying the model has begun until the
        answer's first visible text replaces it (a tool call, whitespace or thinking
        streams as nothing else)."""
        if self._live is not None:
            return
        from rich.live import Live
        from rich.text import Text

        self._live = Live(
            Text(waiting, style="dim"), console=self.console, transient=True, auto_refresh=False
        )
        self._live.start(refresh=True)

    async def show(self, event: Event) -> None:
        """An `EventSink`: the answer's tokens stream in (thinking and progress do not)."""
        if event.type == "token" and event.thinking:
            self.thinking()
        elif event.type == "token":
            self.put(event.text)

    def _tail(self) -> Text:
        """The last lines that fit the screen (a transient view must never scroll)."""
        from rich.text import Text

        rows = max(1, self.console.height - 2)
        recent = plain(self._text[-rows * self.console.width :])
        lines = Text(recent, style="dim").wrap(self.console, self.console.width)
        return Text("\n").join(lines[-rows:])

    def pause(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> StreamingAnswer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.pause()


@dataclass
class QuietWhileAsking:
    """A confirmer that takes the streaming view off the screen before it asks."""

    inner: Confirmer
    view: StreamingAnswer

    async def confirm(self, request: Confirmation) -> bool:
        self.view.pause()
        return await self.inner.confirm(request)
