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
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.model.toolcalls import ToolCall, render_calls
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage

from .egress import REDACTED_ERROR, Destination, Egress, StepOutcome
from .formats import migrate
from .journal import connect
from .labels import CLEAN, UNLABELLED, Labels
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
REDACTED_TEXT = f"[{REDACTED_ERROR}]"  # an earlier call or answer a destination may not see
PlannedAt = Literal["phone", "home", "friend"]
BEGIN_WAIT_S = 60.0  # how long keeping a starting request waits for another writer


class TurnLabels(BaseModel):
    """The labels a turn is kept with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Labels = UNLABELLED  # what its planner read before its first plan
    answer: Labels = UNLABELLED  # the union of what its planner read
    steps: dict[str, Labels] = Field(default_factory=dict)  # by "plan_id/step_id"
    planned_at: PlannedAt | None = None  # where its planner was (it may see the turn again)
    out_after_private: tuple[str, ...] = ()  # open-world calls --yes covered after a private
    # read in the conversation by then (see `SessionState`): the next turns have none left


@dataclass(frozen=True)
class KeptTurn:
    """A turn as kept: what `hearth conversations` shows, and its labels."""

    view: TurnView
    labels: TurnLabels

    def step(self, plan_id: str, step_id: str) -> Labels:
        return self.labels.steps.get(f"{plan_id}/{step_id}", UNLABELLED)

    def seen_by(self, destination: Destination) -> bool:
        """Whether `destination` planned this turn (it read everything the answer holds)."""
        return destination is Destination.PHONE or (
            destination is Destination.HOME and self.labels.planned_at == "home"
        )


class Conversations:
    """Every conversation of one phone home."""

    def __init__(self, path: Path) -> None:
        self.db = connect(path)
        migrate(self.db, path, SCHEMA)
        self._path = path
        self._starts: sqlite3.Connection | None = None  # `begin`'s, in worker threads
        self._starts_lock = threading.Lock()

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
        conversation is marked with its `source`: the user, or an app over the API.

        Blocking (a commit with its fsync): `ask` runs it in a worker thread while the
        request goes on, on a connection of its own, and waits for it before the answer
        is kept or a plan runs."""
        with self._starts_lock:
            if self._starts is None:
                self._starts = connect(self._path, BEGIN_WAIT_S)
            db = self._starts
            with db:
                db.execute("BEGIN")
                self._insert(conversation_id, text, request_id, "running", source=source, db=db)

    def append(
        self,
        conversation_id: str,
        text: str,
        result: AskResult,
        private_steps: set[str],
        labels: TurnLabels | None = None,
        source: str = "user",
    ) -> None:
        """Keep one finished turn, in the place `begin` kept for it if it did (the first
        turn starts the conversation, titled by the start of its request);
        `private_steps` are `plan_id/step_id` of steps whose results are private to the
        phone; `labels` (None: unknown, the strictest); a new conversation is marked
        with its `source`."""
        plans = json.dumps([p.model_dump(mode="json") for p in result.plans])
        stored = None if labels is None else labels.model_dump_json()
        filled = (result.route, result.planner, plans, result.answer, stored)
        private = json.dumps(sorted(private_steps))
        with self.db:
            self.db.execute("BEGIN")
            done = self.db.execute(
                "UPDATE turns SET route = ?, planner = ?, plans = ?, answer = ?, labels = ?,"
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

    def failed(self, request_id: str, error: str, out_after_private: tuple[str, ...] = ()) -> None:
        """A `begin`-kept request ended without an answer: `error` says why; the open-world
        calls --yes covered in it after a private read still count for the conversation."""
        labels = TurnLabels(out_after_private=out_after_private) if out_after_private else None
        self.db.execute(
            "UPDATE turns SET state = 'failed', error = ?, labels = ?"
            " WHERE request_id = ? AND state = 'running'",
            (error, None if labels is None else labels.model_dump_json(), request_id),
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
        filled: tuple[str, str | None, str, str, str | None] = ("", None, "[]", "", None),
        private: str = "[]",
        source: str = "user",
        db: sqlite3.Connection | None = None,
    ) -> None:
        db = db or self.db
        now = time.time()
        title = " ".join(text.split())[:TITLE_CHARS]
        db.execute(
            "INSERT OR IGNORE INTO conversations (id, title, created, updated, source)"
            " VALUES (?, ?, ?, ?, ?)",
            (conversation_id, title, now, now, source),
        )
        db.execute(
            "INSERT INTO turns (conversation_id, request_id, text, route, planner, plans,"
            " answer, labels, private_steps, time, state)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, request_id, text, *filled, private, now, state),
        )
        self._touch(conversation_id, db)

    def _touch(self, conversation_id: str, db: sqlite3.Connection | None = None) -> None:
        (db or self.db).execute(
            "UPDATE conversations SET updated = ? WHERE id = ?", (time.time(), conversation_id)
        )

    def turns(self, conversation_id: str) -> list[KeptTurn]:
        """The conversation's turns, oldest first, each with its labels."""
        rows = self.db.execute(
            "SELECT request_id, text, route, planner, plans, answer, time, state, error, labels"
            " FROM turns WHERE conversation_id = ? ORDER BY seq",
            (conversation_id,),
        )
        return [
            KeptTurn(
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
                _labels(labels, route),
            )
            for request_id, text, route, planner, plans, answer, at, state, error, labels in rows
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
            turns=[turn.view for turn in self.turns(conversation_id)],
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


def _labels(stored: str | None, route: str) -> TurnLabels:
    """A turn's labels; a turn kept before labels existed carries the strictest
    (`UNLABELLED`, its steps and its answer), planned at home if it was remote."""
    if stored is not None:
        return TurnLabels.model_validate_json(stored)
    return TurnLabels(planned_at="home" if route == "remote" else "phone")


def history(
    turns: list[KeptTurn],
    egress: Egress,
    destination: Destination,
    *,
    max_turns: int,
    max_chars: int,
) -> list[ChatMessage]:
    """Earlier turns as chat messages for a model at `destination`: the most recent
    `max_turns` turns whose messages fit in `max_chars` characters together."""
    kept = labelled_history(turns, egress, destination, max_turns=max_turns, max_chars=max_chars)
    return [message for message, _ in kept]


def labelled_history(
    turns: list[KeptTurn],
    egress: Egress,
    destination: Destination,
    *,
    max_turns: int,
    max_chars: int,
) -> list[tuple[ChatMessage, Labels]]:
    """`history`, each message with the labels of what it shows `destination` (a
    redacted value keeps only its untrusted sources: that it was there)."""
    kept: list[list[tuple[ChatMessage, Labels]]] = []
    used = 0
    answered = [t for t in turns if t.view.state == "answered"]  # the others have no answer
    for turn in reversed(answered[-max_turns:] if max_turns > 0 else []):
        messages = _messages(turn, egress, destination)
        size = sum(len(m.content) for m, _ in messages)
        if used + size > max_chars:
            break
        kept.append(messages)
        used += size
    return [m for messages in reversed(kept) for m in messages]


def _shown(
    content: str, labels: Labels, turn: KeptTurn, egress: Egress, destination: Destination
) -> tuple[str, Labels]:
    """Text the turn's planner wrote (calls, the answer), as `destination` may see it."""
    if egress.allows(labels, destination) or turn.seen_by(destination):
        return content, labels
    return REDACTED_TEXT, Labels(untrusted=labels.untrusted)


def _messages(
    turn: KeptTurn, egress: Egress, destination: Destination
) -> list[tuple[ChatMessage, Labels]]:
    view = turn.view
    out = [(ChatMessage(role="user", content=view.text), CLEAN)]
    read = turn.labels.input  # the calls of a plan: from what the planner had read by then
    for plan in view.plans:
        calls = [ToolCall(s.tool, dict(s.arguments)) for s in plan.steps]
        content, labels = _shown(render_calls(calls), read, turn, egress, destination)
        out.append((ChatMessage(role="assistant", content=content), labels))
        for step in plan.steps:
            step_labels = turn.step(plan.plan_id, step.id)
            read |= step_labels
            shown = egress.observation(
                StepOutcome(
                    step_id=step.id,
                    status=step.status,
                    labels=step_labels,
                    result=step.result,
                    error=step.error,
                ),
                destination,
            )
            content_value = (
                shown.result
                if shown.status == "ok"
                else {"status": shown.status, "error": shown.error}
            )
            allowed = egress.allows(step_labels, destination)
            out.append(
                (
                    ChatMessage(
                        role="tool", tool_call_id=step.id, content=json.dumps(content_value)
                    ),
                    step_labels if allowed else Labels(untrusted=step_labels.untrusted),
                )
            )
    if view.answer:
        content, labels = _shown(view.answer, turn.labels.answer, turn, egress, destination)
        out.append((ChatMessage(role="assistant", content=content), labels))
    return out
