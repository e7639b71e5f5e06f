"""Confirmations asked of someone else: a socket or API client, answered by confirm id.

`RelayedConfirmer` turns each `Confirmation` into a `ConfirmEvent` with a fresh,
unguessable id and waits, bounded, for `answer(confirm_id, approve)`. No answer in
time, an unknown id or a client that went away is a refusal, never a yes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import anyio

from .confirm import Confirmation
from .events import ConfirmEvent, EventSink

CONFIRM_TIMEOUT_S = 120.0  # a question nobody answers is refused after this long


@dataclass
class _Question:
    answered: anyio.Event = field(default_factory=anyio.Event)
    approve: bool = False


class RelayedConfirmer:
    """A `Confirmer` whose questions go out as events and come back through `answer`."""

    def __init__(self, emit: EventSink, timeout_s: float = CONFIRM_TIMEOUT_S) -> None:
        self._emit = emit
        self._timeout_s = timeout_s
        self._open: dict[str, _Question] = {}

    async def confirm(self, request: Confirmation) -> bool:
        confirm_id = secrets.token_urlsafe(16)
        question = self._open[confirm_id] = _Question()
        try:
            await self._emit(
                ConfirmEvent(
                    confirm_id=confirm_id,
                    kind=request.kind,
                    plan_id=request.plan_id,
                    tool=request.tool,
                    summary=request.summary,
                    arguments=request.arguments,
                    tainted=request.tainted,
                    text=request.text(),
                )
            )
            with anyio.move_on_after(self._timeout_s):
                await question.answered.wait()
            return question.approve
        finally:
            del self._open[confirm_id]

    def answer(self, confirm_id: str, approve: bool) -> bool:
        """Answer an open question; False when no question has that id (any more)."""
        question = self._open.get(confirm_id)
        if question is None or question.answered.is_set():
            return False
        question.approve = approve
        question.answered.set()
        return True
