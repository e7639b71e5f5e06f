"""`hearth chat`: a conversation in the terminal, one request a line.

Each line is asked in the same conversation (through the companion when it runs, else
a `Service` kept open here), its answer streams in and is then shown whole. On a
terminal the line is edited with prompt_toolkit (arrows, Ctrl-R) and the lines typed
are kept across sessions in `chat_history` under the home (0600). Ctrl-C stops the
answer being written (the node is told); a second Ctrl-C, or one at the prompt, leaves
(exit 130), as do Ctrl-D and `/quit` (exit 0). Lines starting with `/` are commands,
never sent to a model (`//` sends a line that starts with `/`). A request that fails is
reported and the chat goes on.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import anyio
import trio

from hearth.protocol.kit.console import CANCELLED, plain
from hearth.protocol.wire.errors import HearthError

from .client import Ask, ask_request, asking
from .confirm import Terminal
from .events import CANCEL_GRACE_S
from .streaming import QuietWhileAsking, StreamingAnswer
from .terminal import ask_outcome, print_lines

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

Route = Literal["auto", "local", "remote"]
PROMPT = "you> "
HISTORY = "chat_history"
HELP = """\
Type a request and press Enter; Up and Down recall earlier lines.
  /new                       start a new conversation
  /route auto|local|remote   where the next requests go (now: {route})
  /help                      this help
  /quit                      leave (Ctrl-D too)
Ctrl-C stops an answer being written; a second Ctrl-C leaves.
A line starting with // is sent with one / less."""


class Leave(Exception):
    """The person left the chat: with Ctrl-C (`interrupted`), or Ctrl-D or /quit."""

    def __init__(self, interrupted: bool) -> None:
        super().__init__("left")
        self.interrupted = interrupted


class Lines:
    """The lines a person types: edited and remembered on a terminal, else read plainly."""

    def __init__(self, home: Path) -> None:
        self._session: PromptSession[str] | None = None
        if sys.stdin.isatty() and sys.stderr.isatty():
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import FileHistory
            from prompt_toolkit.output import create_output

            history = home / HISTORY
            os.close(os.open(history, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600))
            history.chmod(0o600)
            self._session = PromptSession(
                history=FileHistory(str(history)), output=create_output(stdout=sys.stderr)
            )

    def read(self) -> str:
        """One line typed after the prompt (the prompt on stderr); `Leave` at its end."""
        if self._session is not None:
            try:
                return self._session.prompt(PROMPT)
            except KeyboardInterrupt:  # Ctrl-C at the prompt
                raise Leave(interrupted=True) from None
            except EOFError:  # Ctrl-D
                raise Leave(interrupted=False) from None
        sys.stderr.write(PROMPT)
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            raise Leave(interrupted=False)
        return line


@dataclass
class Answering:
    """The request being answered: `cancel` tells the node to stop, `scope` cuts it off."""

    cancel: anyio.Event = field(default_factory=anyio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


@dataclass
class Chat:
    """One chat's state: its conversation, its route, the request being answered."""

    conversation_id: str | None
    route: Route
    answering: Answering | None = None
    interrupted: bool = False  # left with Ctrl-C

    def command(self, line: str) -> None:
        """Carry out a `/` command (`Leave` for /quit)."""
        name, _, rest = line.partition(" ")
        if name in ("/quit", "/exit"):
            raise Leave(interrupted=False)
        if name == "/help":
            _note(HELP.format(route=self.route))
        elif name == "/new":
            self.conversation_id = None
            _note("A new conversation starts with the next request.")
        elif name == "/route" and rest.strip() in get_args(Route):
            self.route = rest.strip()  # type: ignore[assignment]  # checked just above
            _note(f"Route: {self.route}.")
        elif name == "/route":
            _note(f"Route: {self.route}. Change it with /route auto, local or remote.")
        else:
            _note(f"{plain(name, 40)} is not a command (/help lists them); nothing was sent.")

    async def answer(self, ask: Ask, text: str) -> None:
        """Ask `text` in this chat's conversation and show the outcome (or why not)."""
        request = ask_request(text=text, route=self.route, conversation_id=self.conversation_id)
        self.answering = answering = Answering()
        try:
            with answering.scope, StreamingAnswer() as view:
                confirmer = QuietWhileAsking(Terminal(), view)
                result = await ask(request, view.show, confirmer, answering.cancel)
                self.conversation_id = result.conversation_id
                print_lines(ask_outcome(result.model_dump(mode="json")))
        except HearthError as exc:
            if not answering.cancel.is_set():
                _note(f"error ({exc.code.value}): {plain(exc.message)}")
        finally:
            self.answering = None
        if answering.cancel.is_set():
            _note("Stopped.")

    async def watch(self, interrupts: AsyncIterator[int], leave: trio.CancelScope) -> None:
        """Ctrl-C: stop the answer being written; at the prompt, or a second time, leave."""
        async for _ in interrupts:
            answering = self.answering
            if answering is None or answering.cancel.is_set():
                self.interrupted = True
                leave.cancel()
                return
            answering.cancel.set()  # the node is told to stop...
            answering.scope.deadline = trio.current_time() + CANCEL_GRACE_S  # ...then cut


async def converse(home: Path, conversation_id: str | None, route: Route) -> None:
    """Ask each line typed in one conversation until Ctrl-D or `/quit`; `CANCELLED` when
    left with Ctrl-C."""
    chat = Chat(conversation_id, route)
    lines = Lines(home)
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with asking(home) as ask, trio.open_nursery() as nursery:
            nursery.start_soon(chat.watch, interrupts, nursery.cancel_scope)
            try:
                await _talk(chat, lines, ask)
            except Leave as left:
                chat.interrupted = left.interrupted
            nursery.cancel_scope.cancel()
    if chat.interrupted:
        raise CANCELLED


async def _talk(chat: Chat, lines: Lines, ask: Ask) -> None:
    while True:
        line = (await anyio.to_thread.run_sync(lines.read, abandon_on_cancel=True)).strip()
        if line.startswith("//"):
            await chat.answer(ask, line[1:])
        elif line.startswith("/"):
            chat.command(line)
        elif line:
            await chat.answer(ask, line)


def _note(text: str) -> None:
    """What the chat itself says (not an answer): on stderr."""
    sys.stderr.write(f"{text}\n")
    sys.stderr.flush()
