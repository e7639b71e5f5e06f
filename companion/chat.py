"""`hearth chat`: a conversation in the terminal, one request a line.

Each line is asked in the same conversation (through the companion when it runs, else
a `Service` kept open here), its answer streams in and is then shown whole. Ctrl-D or
`/quit` ends the conversation; a request that fails is reported and the chat goes on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import anyio

from hearth.protocol.kit.console import plain
from hearth.protocol.wire.errors import HearthError

from .client import ask_request, asking
from .confirm import Terminal
from .terminal import QuietWhileAsking, StreamingAnswer, ask_outcome, print_lines

PROMPT = "you> "
QUIT = ("/quit", "/exit")


def read_request() -> str | None:
    """One line typed after the prompt (on stderr); None at the end of input."""
    sys.stderr.write(PROMPT)
    sys.stderr.flush()
    line = sys.stdin.readline()
    return line.strip() if line else None


async def converse(
    home: Path,
    conversation_id: str | None,
    route: Literal["auto", "local", "remote"],
    cancel: anyio.Event,
) -> None:
    """Ask each line typed in one conversation until Ctrl-D, `/quit` or `cancel`."""
    async with asking(home) as ask:
        while not cancel.is_set():
            text = await anyio.to_thread.run_sync(read_request, abandon_on_cancel=True)
            if text is None or text in QUIT:
                return
            if not text:
                continue
            try:
                request = ask_request(text=text, route=route, conversation_id=conversation_id)
                with StreamingAnswer() as view:
                    confirmer = QuietWhileAsking(Terminal(), view)
                    result = await ask(request, view.show, confirmer, cancel)
            except HearthError as exc:
                if cancel.is_set():
                    raise
                _problem(exc)
                continue
            conversation_id = result.conversation_id
            print_lines(ask_outcome(result.model_dump(mode="json")))


def _problem(exc: HearthError) -> None:
    sys.stderr.write(f"error ({exc.code.value}): {plain(exc.message)}\n")
    sys.stderr.flush()
