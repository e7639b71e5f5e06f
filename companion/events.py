"""What a request asks for, and the events it streams back.

`Service.ask` reports progress through an `EventSink`: the route it took, tokens
(thinking apart), each step as it runs and ends, confirmations to answer, then
the answer or an error. The companion socket and the HTTP API send these as JSON
lines / server-sent events; a one-shot `hearth ask` renders them on the terminal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from hearth.protocol.wire.chat import ChatMessage
from hearth.protocol.wire.generation import AnswerSettings

from .results import AskResult

MAX_REQUEST_CHARS = 32 * 1024
MAX_HISTORY_MESSAGES = 256
MAX_HISTORY_CHARS = 512 * 1024


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AskRequest(_Model):
    """One request to the assistant."""

    text: Annotated[str, Field(max_length=MAX_REQUEST_CHARS)]
    route: Literal["auto", "local", "remote"] = "auto"
    tool_choice: Literal["auto", "required", "none"] = "auto"
    thinking: bool = False
    conversation_id: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    continue_last: bool = False  # continue the most recent conversation
    attachments: Annotated[list[str], Field(max_length=16)] = Field(default_factory=list)
    confirm: Literal["ask", "yes", "no"] = "ask"  # yes/no: `--yes`/`--no` (Scripted)
    history: Annotated[list[ChatMessage], Field(max_length=MAX_HISTORY_MESSAGES)] = Field(
        default_factory=list
    )
    """Earlier messages an app keeps itself (an OpenAI client's); used instead of the
    stored conversation's turns when given."""
    generation: AnswerSettings | None = None  # an app's sampling and answer format
    source: Literal["user", "api"] = "user"
    """Who asked: the user (the chat page, the CLI) or an app over the API, whose
    requests are kept apart from the user's conversations unless it names one."""

    @field_validator("history")
    @classmethod
    def _bounded(cls, history: list[ChatMessage]) -> list[ChatMessage]:
        if sum(len(m.content) for m in history) > MAX_HISTORY_CHARS:
            raise ValueError(f"more than {MAX_HISTORY_CHARS} characters of history")
        return history


class TokenEvent(_Model):
    type: Literal["token"] = "token"
    text: str
    thinking: bool = False


class RouteEvent(_Model):
    type: Literal["route"] = "route"
    route: Literal["local", "remote"]
    planner: str | None = None
    reason: str
    escalated: bool = False
    deferred: bool = False


class StepEvent(_Model):
    type: Literal["step"] = "step"
    plan_id: str
    round: int
    step_id: str
    tool: str
    status: Literal["running", "ok", "error", "refused", "timed_out", "skipped"]
    error: str | None = None


class ConfirmEvent(_Model):
    type: Literal["confirm"] = "confirm"
    confirm_id: str
    # document: may it leave; friend: may a friend's node plan this request (issue 20)
    kind: Literal["plan", "step", "resume", "document", "friend"]
    plan_id: str
    tool: str = ""
    summary: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    tainted: dict[str, str] = Field(default_factory=dict)
    text: str  # Confirmation.text(): plain, one value per line


class AnswerEvent(_Model):
    type: Literal["answer"] = "answer"
    result: AskResult


class ErrorEvent(_Model):
    type: Literal["error"] = "error"
    code: str
    message: str


Event = Annotated[
    TokenEvent | RouteEvent | StepEvent | ConfirmEvent | AnswerEvent | ErrorEvent,
    Field(discriminator="type"),
]
EventSink = Callable[[Event], Awaitable[None]]


async def discard(event: Event) -> None:
    """An `EventSink` for callers that only want the result."""
