"""What a person sees in the terminal: a request's outcome, and its answer streaming in.

Text from a model, a tool or a peer is shown as plain text (`plain`: control
characters visible, no markup). The streamed answer is a transient view on stderr that
the final answer replaces, so a terminal shows each answer once, and a tool call
streams as nothing (its step is listed when it has run). When stderr is not a terminal
nothing streams: the answer is printed once, at the end.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from hearth.protocol.console import plain

from .confirm import Confirmation, Confirmer
from .events import Event, TokenEvent

ARGS_SHOWN = 80  # characters of a step's arguments in a summary, before "…(N more …)"
TOOL_CALL = ("<tool_call>", "</tool_call>")


class ProseOnly:
    """Streamed text without its tool calls: what lies between `<tool_call>` and
    `</tool_call>` is dropped, however the pieces split the tags."""

    def __init__(self) -> None:
        self._held = ""
        self._in_call = False

    def feed(self, piece: str) -> str:
        self._held += piece
        shown: list[str] = []
        while True:
            tag = TOOL_CALL[self._in_call]
            at = self._held.find(tag)
            if at < 0:
                keep = _partial_tag(self._held, tag)
                if not self._in_call:
                    shown.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep :]
                return "".join(shown)
            if not self._in_call:
                shown.append(self._held[:at])
            self._held = self._held[at + len(tag) :]
            self._in_call = not self._in_call


def _partial_tag(text: str, tag: str) -> int:
    """How many of `text`'s last characters could begin `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


class StreamingAnswer:
    """The answer as it streams on stderr: on a terminal, a transient view that `pause()`
    takes off the screen (for a question, or the final answer); elsewhere nothing (a log
    or a script gets the answer once, at the end)."""

    REFRESH_S = 0.1

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._prose = ProseOnly()
        self._text = ""
        self._live: Live | None = None
        self._drawn = 0.0

    async def add(self, piece: str) -> None:
        if not self.console.is_terminal:  # a log or a script: the answer once, at the end
            return
        self._text += self._prose.feed(piece)
        if not self._text.strip():
            return
        if self._live is None:
            self._live = Live(console=self.console, transient=True, auto_refresh=False)
            self._live.start()
        if time.monotonic() - self._drawn >= self.REFRESH_S:
            self._live.update(self._tail(), refresh=True)
            self._drawn = time.monotonic()

    async def show(self, event: Event) -> None:
        """An `EventSink`: the answer's tokens stream in (thinking and progress do not)."""
        if isinstance(event, TokenEvent) and not event.thinking:
            await self.add(event.text)

    def _tail(self) -> Text:
        """The last lines that fit the screen (a transient view must never scroll)."""
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


def step_line(step: dict[str, Any]) -> Text:
    """`s1 notes_create {"text": "milk"} → ok`, or `→ refused: why`."""
    arguments = plain(json.dumps(step["arguments"], ensure_ascii=False), ARGS_SHOWN)
    line = Text(f"  {step['id']} {plain(step['tool'])} {arguments} → ")
    line.append(step["status"], style="green" if step["status"] == "ok" else "yellow")
    if step["status"] != "ok" and step.get("error"):
        line.append(f": {plain(str(step['error']), 200)}")
    return line


def ask_outcome(out: dict[str, Any]) -> list[Text]:
    """A `hearth ask` outcome as lines: the route and why, each plan's steps, the answer."""
    lines = [Text(plain(f"{out['route']}: {out['reason']}"), style="dim")]
    for plan in out["plans"]:
        lines.append(
            Text(
                f"plan {plan['plan_id'][:8]}, round {plan['round']}, "
                f"signed by {plain(plan['signer'])}",
                style="dim",
            )
        )
        lines += [step_line(step) for step in plan["steps"]]
    lines.append(Text(plain(out["answer"])))
    if out.get("untrusted_sources"):
        sources = ", ".join(out["untrusted_sources"])
        lines.append(
            Text(plain(f"written after reading untrusted input: {sources}"), style="yellow")
        )
    return lines


def print_lines(lines: list[Text], console: Console | None = None) -> None:
    """Print rich `Text` lines (never markup) on stdout."""
    console = console or Console(file=sys.stdout, highlight=False)
    for line in lines:
        console.print(line)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def conversation_lines(out: dict[str, Any]) -> list[Text]:
    """`hearth conversations`: one line per conversation, or one conversation's turns."""
    if "conversations" in out:
        if not out["conversations"]:
            return [Text("No conversations yet: `hearth ask --continue` or `hearth chat`.")]
        return [
            Text(plain(f"{c['id']}  {_when(c['updated'])}  {c['turns']} turn(s)  {c['title']}"))
            for c in out["conversations"]
        ]
    lines = [Text(plain(f"{out['id']}: {out['title']}"), style="bold")]
    for turn in out["turns"]:
        lines.append(Text(plain(f"[{_when(turn['time'])}, {turn['route']}] "), style="dim"))
        lines[-1].append(plain(f"> {turn['text']}"))
        lines += [step_line(step) for plan in turn["plans"] for step in plan["steps"]]
        lines.append(Text(plain(turn["answer"])))
    return lines


def inbox_lines(out: dict[str, Any]) -> list[Text]:
    """`hearth inbox`: what waits for the home node, then what came back."""
    lines = [
        Text(f"waiting since {_when(w['since'])}: ", style="dim").append(plain(w["text"], 200))
        for w in out["waiting"]
    ]
    for answered in out["answered"]:
        lines += ask_outcome(answered)
    for dropped in out.get("dropped", []):  # not sent, and why
        lines.append(Text(f"not sent ({plain(dropped['note'], 200)}): ", style="yellow"))
        lines[-1].append(plain(dropped["text"], 200))
    return lines or [Text("Nothing waits for the home node.")]
