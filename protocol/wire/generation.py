"""What an app asks of an answer's generation, and what the answer cost: carried in a
`PlanRequest` and its `Final`, and in the companion's requests and results. Kept light
(no frame types): the thin `hearth` client loads it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, JsonValue

from .chat import Model

MAX_STOPS = 4  # stop sequences of one request (OpenAI's bound)


class AnswerSettings(Model):
    """How an app wants its answer generated (the OpenAI API's sampling fields); `None`
    leaves a setting to the generating side's configuration. `max_tokens` is capped by
    the session's `Limits.max_tokens`; the answer ends before the first `stop` string.
    `json_schema` (with `json`) constrains the answer to JSON that fits it."""

    max_tokens: Annotated[int, Field(ge=1, le=8192)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: Annotated[int, Field(ge=0, lt=2**32)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    stop: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=MAX_STOPS)
    ] = Field(default_factory=list)
    json_answer: bool = False  # the answer is one JSON value (an object unless a schema says)
    json_schema: dict[str, JsonValue] | None = None


class Usage(Model):
    """Tokens one answer cost, as the runtime that generated counted them."""

    prompt_tokens: Annotated[int, Field(ge=0)] = 0
    completion_tokens: Annotated[int, Field(ge=0)] = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
