"""Conversations: the turns of each, in SQLite under the phone's home (0600).

A turn is one request, where it ran, who planned it, its plans (as `hearth ask
--json` shows them) and its answer. Earlier turns go to whichever model answers
next as chat messages: the request, each plan's calls (rendered as the model's
own tool-call text) with their results as tool messages, and the answer. What a
destination may not learn (a private step's result or error) is redacted by the
egress filter, as observations are; the history is bounded by turns and by
characters, oldest turns dropped first.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from hearth.protocol.model.toolcalls import ToolCall, render_calls
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage

from .egress import Destination, Egress, StepOutcome
from .formats import migrate
from .journal import connect
from .labels import CLEAN, PRIVATE
from .results import (
    AskResult,
    ConversationDetail,
    ConversationsResult,
    ConversationSummary,
    PlanView,
    TurnView,
)

TITLE_CHARS = 60
SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    request_id TEXT NOT NULL, text TEXT NOT NULL, route TEXT NOT NULL, planner TEXT,
    plans TEXT NOT NULL, answer TEXT NOT NULL, private_steps TEXT NOT NULL, time REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_of ON turns (conversation_id, seq);
"""


class Conversations:
    """Every conversation of one phone home."""

    def __init__(self, path: Path) -> None:
        self.db = connect(path)
        migrate(self.db, path, SCHEMA)

    def for_request(self, conversation_id: str | None, continue_last: bool) -> str:
        """The conversation a request belongs to: the one named (which must exist), the
        most recent one (`continue_last`, a new one if there is none), or a new one (kept
        once its first turn is)."""
        if conversation_id is not None:
            if self._summary(conversation_id) is None:
                raise HearthError(ErrorCode.INVALID_INPUT, f"no conversation {conversation_id!r}")
            return conversation_id
        if continue_last:  # the user's: an app's requests are not what the user continues
            row = self.db.execute(
                "SELECT id FROM conversations WHERE source = 'user'"
                " ORDER BY updated DESC, rowid DESC LIMIT 1"
            ).fetchone()
            if row is not None:
                return str(row[0])
        return uuid.uuid4().hex

    def begin(self, conversation_id: str, request_id: str, text: str, source: str = "user") -> None:
        """Keep a request as it starts (`running`), so that it is in its conversation
        whatever happens next: `append` fills it in, `failed` says why it ended without
        an answer, and a companion killed meanwhile leaves it `interrupted`. A new
        conversation is marked with its `source`: the user, or an app over the API."""
        with self.db:
            self.db.execute("BEGIN")
            self._insert(conversation_id, text, request_id, "running", source=source)

    def append(
        self,
        conversation_id: str,
        text: str,
        result: AskResult,
        private_steps: set[str],
        source: str = "user",
    ) -> None:
        """Keep one finished turn, in the place `begin` kept for it if it did (the first
        turn starts the conversation, titled by the start of its request);
        `private_steps` are `plan_id/step_id` of steps whose results are private to the
        phone; a new conversation is marked with its `source`."""
        plans = json.dumps([p.model_dump(mode="json") for p in result.plans])
        filled = (result.route, result.planner, plans, result.answer)
        private = json.dumps(sorted(private_steps))
        with self.db:
            self.db.execute("BEGIN")
            done = self.db.execute(
                "UPDATE turns SET route = ?, planner = ?, plans = ?, answer = ?,"
                " private_steps = ?, state = 'answered' WHERE conversation_id = ?"
                " AND request_id = ? AND state = 'running'",
                (*filled, private, conversation_id, result.request_id),
            )
            if done.rowcount == 0:
                self._insert(
                    conversation_id, text, result.request_id, "answered", filled, private, source
                )
            else:
                self._touch(conversation_id)

    def failed(self, request_id: str, error: str) -> None:
        """A `begin`-kept request ended without an answer: `error` says why."""
        self.db.execute(
            "UPDATE turns SET state = 'failed', error = ?"
            " WHERE request_id = ? AND state = 'running'",
            (error, request_id),
        )

    def interrupted(self) -> int:
        """Requests a stopped process left `running` (call only while no other process
        asks: the resident companion, at start); how many."""
        return self.db.execute(
            "UPDATE turns SET state = 'interrupted',"
            " error = 'the companion stopped before it was answered' WHERE state = 'running'"
        ).rowcount

    def _insert(
        self,
        conversation_id: str,
        text: str,
        request_id: str,
        state: str,
        filled: tuple[str, str | None, str, str] = ("", None, "[]", ""),
        private: str = "[]",
        source: str = "user",
    ) -> None:
        now = time.time()
        title = " ".join(text.split())[:TITLE_CHARS]
        self.db.execute(
            "INSERT OR IGNORE INTO conversations (id, title, created, updated, source)"
            " VALUES (?, ?, ?, ?, ?)",
            (conversation_id, title, now, now, source),
        )
        self.db.execute(
            "INSERT INTO turns (conversation_id, request_id, text, route, planner, plans,"
            " answer, private_steps, time, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, request_id, text, *filled, private, now, state),
        )
        self._touch(conversation_id)

    def _touch(self, conversation_id: str) -> None:
        self.db.execute(
            "UPDATE conversations SET updated = ? WHERE id = ?", (time.time(), conversation_id)
        )

    def turns(self, conversation_id: str) -> list[tuple[TurnView, set[str]]]:
        """The conversation's turns, oldest first, each with its private steps."""
        rows = self.db.execute(
            "SELECT request_id, text, route, planner, plans, answer, private_steps, time,"
            " state, error FROM turns WHERE conversation_id = ? ORDER BY seq",
            (conversation_id,),
        )
        return [
            (
                TurnView(
                    request_id=request_id,
                    text=text,
                    route=route,
                    planner=planner,
                    plans=[PlanView.model_validate(p) for p in json.loads(plans)],
                    answer=answer,
                    time=at,
                    state=state,
                    error=error,
                ),
                set(json.loads(private)),
            )
            for request_id, text, route, planner, plans, answer, private, at, state, error in rows
        ]

    def summaries(self, everyone: bool = False) -> ConversationsResult:
        """`hearth conversations --json`: the user's, newest first; with `everyone`
        (`--all`), apps' requests over the API too."""
        rows = self.db.execute(
            "SELECT c.id, c.title, COUNT(t.seq), c.updated, c.source FROM conversations c"
            " LEFT JOIN turns t ON t.conversation_id = c.id"
            " WHERE ? OR c.source = 'user'"
            " GROUP BY c.id ORDER BY c.updated DESC, c.rowid DESC",
            (everyone,),
        )
        return ConversationsResult(
            conversations=[
                ConversationSummary(id=i, title=title, turns=n, updated=at, source=source)
                for i, title, n, at, source in rows
            ]
        )

    def detail(self, conversation_id: str) -> ConversationDetail:
        """`hearth conversations ID --json`: the conversation with its turns."""
        summary = self._summary(conversation_id)
        if summary is None:
            raise HearthError(ErrorCode.INVALID_INPUT, f"no conversation {conversation_id!r}")
        return ConversationDetail(
            id=summary.id,
            title=summary.title,
            updated=summary.updated,
            turns=[turn for turn, _ in self.turns(conversation_id)],
        )

    def rename(self, conversation_id: str, title: str) -> ConversationSummary:
        """Give the conversation a new title (its turns are kept)."""
        with self.db:
            self.db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)
            )
        summary = self._summary(conversation_id)
        if summary is None:
            raise HearthError(ErrorCode.INVALID_INPUT, f"no conversation {conversation_id!r}")
        return summary

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation and its turns."""
        if self._summary(conversation_id) is None:
            raise HearthError(ErrorCode.INVALID_INPUT, f"no conversation {conversation_id!r}")
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM turns WHERE conversation_id = ?", (conversation_id,))
            self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def _summary(self, conversation_id: str) -> ConversationSummary | None:
        row = self.db.execute(
            "SELECT c.id, c.title, COUNT(t.seq), c.updated, c.source FROM conversations c"
            " LEFT JOIN turns t ON t.conversation_id = c.id WHERE c.id = ? GROUP BY c.id",
            (conversation_id,),
        ).fetchone()
        if row is None:
            return None
        i, title, n, at, source = row
        return ConversationSummary(id=i, title=title, turns=n, updated=at, source=source)


def history(
    turns: list[tuple[TurnView, set[str]]],
    egress: Egress,
    destination: Destination,
    *,
    max_turns: int,
    max_chars: int,
) -> list[ChatMessage]:
    """Earlier turns as chat messages for a model at `destination`: the most recent
    `max_turns` turns whose messages fit in `max_chars` characters together."""
    kept: list[list[ChatMessage]] = []
    used = 0
    answered = [t for t in turns if t[0].state == "answered"]  # the others have no answer
    for turn, private in reversed(answered[-max_turns:] if max_turns > 0 else []):
        messages = _messages(turn, private, egress, destination)
        size = sum(len(m.content) for m in messages)
        if used + size > max_chars:
            break
        kept.append(messages)
        used += size
    return [m for messages in reversed(kept) for m in messages]


def _messages(
    turn: TurnView, private: set[str], egress: Egress, destination: Destination
) -> list[ChatMessage]:
    out = [ChatMessage(role="user", content=turn.text)]
    for plan in turn.plans:
        calls = [ToolCall(s.tool, dict(s.arguments)) for s in plan.steps]
        out.append(ChatMessage(role="assistant", content=render_calls(calls)))
        for step in plan.steps:
            shown = egress.observation(
                StepOutcome(
                    step_id=step.id,
                    status=step.status,
                    labels=PRIVATE if f"{plan.plan_id}/{step.id}" in private else CLEAN,
                    result=step.result,
                    error=step.error,
                ),
                destination,
            )
            content = (
                shown.result
                if shown.status == "ok"
                else {"status": shown.status, "error": shown.error}
            )
            out.append(ChatMessage(role="tool", tool_call_id=step.id, content=json.dumps(content)))
    if turn.answer:
        out.append(ChatMessage(role="assistant", content=turn.answer))
    return out
