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
# who started a conversation: the user ("user") or an app over the API ("api"); added to
# a database made before it (every older conversation is the user's)
SOURCE_COLUMN = "source TEXT NOT NULL DEFAULT 'user'"


class Conversations:
    """Every conversation of one phone home."""

    def __init__(self, path: Path) -> None:
        self.db = connect(path)
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(conversations)")}
        if "source" not in columns:
            self.db.execute(f"ALTER TABLE conversations ADD COLUMN {SOURCE_COLUMN}")

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

    def append(
        self,
        conversation_id: str,
        text: str,
        result: AskResult,
        private_steps: set[str],
        source: str = "user",
    ) -> None:
        """Keep one finished turn (the first one starts the conversation, titled by the
        start of its request, marked with its `source`); `private_steps` are
        `plan_id/step_id` of steps whose results are private to the phone."""
        now = time.time()
        plans = json.dumps([p.model_dump(mode="json") for p in result.plans])
        title = " ".join(text.split())[:TITLE_CHARS]
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute(
                "INSERT OR IGNORE INTO conversations (id, title, created, updated, source)"
                " VALUES (?, ?, ?, ?, ?)",
                (conversation_id, title, now, now, source),
            )
            self.db.execute(
                "INSERT INTO turns (conversation_id, request_id, text, route, planner, plans,"
                " answer, private_steps, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    result.request_id,
                    text,
                    result.route,
                    result.planner,
                    plans,
                    result.answer,
                    json.dumps(sorted(private_steps)),
                    now,
                ),
            )
            self.db.execute(
                "UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id)
            )

    def turns(self, conversation_id: str) -> list[tuple[TurnView, set[str]]]:
        """The conversation's turns, oldest first, each with its private steps."""
        rows = self.db.execute(
            "SELECT request_id, text, route, planner, plans, answer, private_steps, time"
            " FROM turns WHERE conversation_id = ? ORDER BY seq",
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
                ),
                set(json.loads(private)),
            )
            for request_id, text, route, planner, plans, answer, private, at in rows
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
    for turn, private in reversed(turns[-max_turns:] if max_turns > 0 else []):
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
