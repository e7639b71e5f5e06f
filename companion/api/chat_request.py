"""A chat-completions request as OpenAI documents it: every field honoured or refused.

Each documented field is declared here. What the phone does with it (README "The
OpenAI-compatible API" has the table) is one of: honoured (sampling, the answer's
length and format, tools), accepted with nothing to do on a phone (`store`,
`service_tier`, `prompt_cache_key`, ...), or refused with a 400 naming the field
(`n > 1`, `logprobs: true`, audio, image parts, ...). With no `seed`, each request
draws a fresh one (`drawn_seed`), reported in the answer's `system_fingerprint`. Fields
OpenAI does not document are ignored, never echoed.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from hearth.protocol.wire.messages import MAX_STOPS, AnswerSettings, ToolName

from ..events import MAX_REQUEST_CHARS
from .errors import ApiError

MAX_MESSAGES = 128
MAX_TOTAL_CHARS = 256 * 1024  # of every message's text together
MAX_TOOLS = 64
MAX_ANSWER_TOKENS = 8192  # beyond any phone's limit: a larger ask is capped by the limits
MAX_METADATA = 16  # OpenAI's bounds: 16 keys of 64 characters, values of 512

Text = Annotated[str, Field(max_length=MAX_REQUEST_CHARS)]
Short = Annotated[str, Field(max_length=128)]


class _Open(BaseModel):
    """A part of a client's request: fields OpenAI does not document are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Part(_Open):
    """One part of a message's content: text is read; any other kind is refused."""

    type: Short
    text: Text = ""
    refusal: Text = ""  # an assistant's earlier refusal, read as its text


PART_KINDS = {
    "image_url": "image parts are not supported: the phone's models read text only",
    "input_audio": "audio parts are not supported: the phone's models read text only",
    "file": "file parts are not supported: attach documents with the native API or `hearth ask`",
}


class FunctionCall(_Open):
    name: ToolName  # written back into the model's own call syntax: no markup in it
    arguments: Text  # a JSON object, as text


class ToolCallIn(_Open):
    id: Short
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | Annotated[list[Part], Field(max_length=64)] | None = None
    name: Short | None = None
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=MAX_TOOLS)] = Field(
        default_factory=list
    )
    tool_call_id: Short | None = None
    refusal: Text | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text or part.refusal for part in self.content)
        return self.content or ""


class FunctionDef(_Open):
    name: Short
    description: Annotated[str, Field(max_length=4096)] = ""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    strict: bool | None = None  # the phone always holds calls to their schemas


class ToolDef(_Open):
    type: Literal["function"] = "function"
    function: FunctionDef


class NamedFunction(_Open):
    name: Short


class NamedTool(_Open):
    """`tool_choice` naming one function: the model must call it."""

    type: Literal["function"]
    function: NamedFunction


class JsonSchemaFormat(_Open):
    name: Short = "answer"
    description: Annotated[str, Field(max_length=4096)] = ""
    schema_: dict[str, JsonValue] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Open):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StreamOptions(_Open):
    include_usage: bool = False
    include_obfuscation: bool = False  # padding against length side channels: never sent here


Stop = Annotated[str, Field(min_length=1, max_length=256)]
MetaKey = Annotated[str, Field(max_length=64)]
MetaValue = Annotated[str, Field(max_length=512)]


class ChatRequest(_Open):
    """`POST /v1/chat/completions`, field by field (OpenAI's order)."""

    messages: Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)]
    model: Short
    audio: dict[str, JsonValue] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    function_call: JsonValue = None
    functions: JsonValue = None
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    metadata: Annotated[dict[MetaKey, MetaValue], Field(max_length=MAX_METADATA)] | None = None
    modalities: Annotated[list[Short], Field(max_length=4)] | None = None
    n: Annotated[int, Field(ge=1, le=128)] | None = None
    parallel_tool_calls: bool = True
    prediction: dict[str, JsonValue] | None = None  # a speed hint: the answer is the same
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    prompt_cache_key: Short | None = None  # the phone caches the shared prompt prefix itself
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    response_format: ResponseFormat | None = None
    safety_identifier: Short | None = None
    seed: int | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    stop: Stop | Annotated[list[Stop], Field(max_length=MAX_STOPS)] | None = None
    store: bool | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    tool_choice: Literal["auto", "required", "none"] | NamedTool | None = None
    tools: Annotated[list[ToolDef], Field(max_length=MAX_TOOLS)] = Field(default_factory=list)
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    user: Short | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    web_search_options: dict[str, JsonValue] | None = None

    @model_validator(mode="after")
    def _bounded(self) -> ChatRequest:
        if sum(len(m.text()) for m in self.messages) > MAX_TOTAL_CHARS:
            raise ValueError(f"messages hold more than {MAX_TOTAL_CHARS} characters")
        return self

    def refuse_unsupported(self) -> None:
        """400 naming the first field asked for that the phone cannot do (never ignored)."""
        refusals: list[tuple[bool, str, str]] = [
            (bool(self.n and self.n > 1), "n", "n > 1 is not supported: ask once per answer"),
            # `logprobs: false` (with `top_logprobs: 0`) asks for none: accepted, as OpenAI does
            (bool(self.logprobs), "logprobs", "logprobs are not supported"),
            (bool(self.top_logprobs), "top_logprobs", "top_logprobs are not supported"),
            (bool(self.logit_bias), "logit_bias", "logit_bias is not supported"),
            (self.audio is not None, "audio", "audio output is not supported"),
            (
                any(m != "text" for m in self.modalities or []),
                "modalities",
                "only the text modality is supported",
            ),
            (
                self.functions is not None or self.function_call is not None,
                "functions",
                "`functions` and `function_call` are deprecated: send `tools` and `tool_choice`",
            ),
            (
                self.web_search_options is not None,
                "web_search_options",
                "web_search_options is not supported: without `tools`, the phone's assistant "
                "searches the web with its own tool when it needs to",
            ),
            (
                self.verbosity not in (None, "medium"),
                "verbosity",
                "only verbosity `medium` is supported",
            ),
        ]
        for refused, param, message in refusals:
            if refused:
                raise ApiError(400, "unsupported_parameter", message, param=param)
        for i, m in enumerate(self.messages):
            for part in m.content if isinstance(m.content, list) else []:
                if part.type not in ("text", "refusal"):
                    message = PART_KINDS.get(
                        part.type, f"content parts of type {part.type[:32]!r} are not supported"
                    )
                    raise ApiError(
                        400,
                        "unsupported_content",
                        f"messages[{i}]: {message}",
                        param=f"messages[{i}].content",
                    )
        fmt = self.response_format
        if fmt is not None and fmt.type != "text" and self.tools and self.choice != "none":
            raise ApiError(
                400,
                "unsupported_parameter",
                "a JSON response_format with `tools` needs tool_choice `none`",
                param="response_format",
            )
        if fmt is not None and fmt.type == "json_schema" and fmt.json_schema is None:
            raise ApiError(
                400,
                "invalid_input",
                "response_format json_schema needs its `json_schema` object",
                param="response_format",
            )

    @property
    def choice(self) -> Literal["auto", "required", "none"]:
        """The round's mode: a named function is `required` (over that function alone)."""
        if isinstance(self.tool_choice, NamedTool):
            return "required"
        return self.tool_choice or "auto"

    @property
    def streamed(self) -> bool:
        return bool(self.stream)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def thinking(self) -> bool:
        return self.reasoning_effort in ("low", "medium", "high")

    @property
    def conversation(self) -> str | None:
        """`metadata.conversation`: the user's conversation this request continues."""
        return (self.metadata or {}).get("conversation")

    def drawn_seed(self) -> int:
        """The seed this request samples with: its own (within the runtime's 32 bits), or
        a fresh one when it names none (as OpenAI, llama-server and Ollama draw one), so
        that two requests without a seed differ; the answer reports it to repeat it."""
        if self.seed is None:
            return secrets.randbelow(2**31)
        return self.seed % 2**32

    def settings(self, seed: int | None = None) -> AnswerSettings:
        """The sampling, length and format this request asks for (sampled with `seed`,
        else the request's own)."""
        if seed is None and self.seed is not None:
            seed = self.seed % 2**32
        fmt = self.response_format
        stops = [self.stop] if isinstance(self.stop, str) else self.stop or []
        most = self.max_completion_tokens or self.max_tokens
        return AnswerSettings(
            max_tokens=None if most is None else min(most, MAX_ANSWER_TOKENS),
            temperature=self.temperature,
            top_p=self.top_p,
            seed=seed,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            stop=stops,
            json_answer=fmt is not None and fmt.type != "text",
            json_schema=fmt.json_schema.schema_ if fmt and fmt.json_schema else None,
        )
