"""The OpenAI-compatible API: `GET /v1/models` and `POST /v1/chat/completions`.

Models: `hearth` (routed), `hearth-local` (the phone's model), `hearth-home` (the home
node). Without client `tools` a request is an ask of the phone's assistant: its own
tools run through the executor, and every confirmation is answered "no" (an OpenAI
client cannot answer one; the native API can). With client `tools`, the calls come
back as standard `tool_calls` (finish_reason "tool_calls") for the app to run, and its
`tool` messages come back in `messages`. Streaming is OpenAI's server-sent events;
errors are OpenAI's error object. Fields of a request this API does not use (sampling
settings, `user`, ...) are accepted and ignored; what it uses is bounded.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Annotated, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hearth.protocol.model.toolcalls import ToolCall, render_calls
from hearth.protocol.model.validate import validate_calls
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import ChatMessage, ToolName, ToolSpec

from ..confirm import Scripted
from ..events import MAX_REQUEST_CHARS, AskRequest, Event, EventSink, TokenEvent, discard
from ..results import ClientToolCall
from ..terminal import ProseOnly
from .errors import ApiError, invalid, typed_body
from .streams import Deferred, Emit, EventStream, Slots

if TYPE_CHECKING:
    from ..service import Service

Routing = Literal["auto", "local", "remote"]
MODELS: dict[str, Routing] = {"hearth": "auto", "hearth-local": "local", "hearth-home": "remote"}
MAX_MESSAGES = 128
MAX_TOTAL_CHARS = 256 * 1024  # of every message's text together
MAX_TOOLS = 64

Text = Annotated[str, Field(max_length=MAX_REQUEST_CHARS)]
Short = Annotated[str, Field(max_length=128)]


class _Open(BaseModel):
    """A part of a client's request: fields we do not use are ignored, never echoed."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class TextPart(_Open):
    type: Literal["text"]
    text: Text


class FunctionCall(_Open):
    name: ToolName  # written back into the model's own call syntax: no markup in it
    arguments: Text  # a JSON object, as text


class ToolCallIn(_Open):
    id: Short
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | Annotated[list[TextPart], Field(max_length=64)] | None = None
    name: Short | None = None
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=MAX_TOOLS)] = Field(
        default_factory=list
    )
    tool_call_id: Short | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class FunctionDef(_Open):
    name: Short
    description: Annotated[str, Field(max_length=4096)] = ""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)


class ToolDef(_Open):
    type: Literal["function"] = "function"
    function: FunctionDef


class ChatRequest(_Open):
    model: Short
    messages: Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)]
    tools: Annotated[list[ToolDef], Field(max_length=MAX_TOOLS)] = Field(default_factory=list)
    tool_choice: Literal["auto", "required", "none"] = "auto"
    stream: bool = False
    n: Annotated[int, Field(ge=1, le=1)] = 1
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None

    @model_validator(mode="after")
    def _bounded(self) -> ChatRequest:
        if sum(len(m.text()) for m in self.messages) > MAX_TOTAL_CHARS:
            raise ValueError(f"messages hold more than {MAX_TOTAL_CHARS} characters")
        return self

    @property
    def thinking(self) -> bool:
        return self.reasoning_effort in ("low", "medium", "high")


# What the API answers: OpenAI's objects, as its clients read them.


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionCallOut(_Out):
    name: str
    arguments: str


class ToolCallOut(_Out):
    index: int
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut

    @classmethod
    def of(cls, index: int, call: ClientToolCall) -> ToolCallOut:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        return cls(
            index=index, id=call.id, function=FunctionCallOut(name=call.name, arguments=arguments)
        )


class AssistantMessage(_Out):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCallOut] | None = None


class Choice(_Out):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "tool_calls"]
    logprobs: None = None


class Routed(_Out):
    """Where Hearth answered (an extension field; OpenAI clients ignore it)."""

    route: Literal["local", "remote"]
    reason: str
    request_id: str | None = None
    untrusted_sources: list[str] = Field(default_factory=list)
    """What the answer's planner read that anyone could have written (a web page, a
    message, a document): an answer written after it says so, as every output does."""


class ChatCompletion(_Out):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    hearth: Routed


class Delta(_Out):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None  # thinking, as llama.cpp's and vLLM's servers send it
    tool_calls: list[ToolCallOut] | None = None


class ChunkChoice(_Out):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "tool_calls"] | None = None


class ChatChunk(_Out):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    hearth: Routed | None = None


class ModelCard(_Out):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "hearth"


class ModelList(_Out):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(_Out):
    message: str
    type: str
    param: str | None = None
    code: str


class ErrorBody(_Out):
    error: ErrorDetail

    @classmethod
    def of(cls, exc: ApiError) -> ErrorBody:
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        return cls(
            error=ErrorDetail(message=exc.message, type=kind, param=exc.param, code=exc.code)
        )


def error_response(exc: ApiError) -> JSONResponse:
    body = ErrorBody.of(exc).model_dump(mode="json")
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


def sse(model: BaseModel) -> bytes:
    return b"data: " + model.model_dump_json(exclude_none=True).encode() + b"\n\n"


class Answer:
    """One chat completion: its id and model, and the whole of it once it is known."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def whole(self, answer: str, calls: list[ClientToolCall], routed: Routed) -> ChatCompletion:
        message = AssistantMessage(
            content=answer or (None if calls else ""),
            tool_calls=[ToolCallOut.of(i, c) for i, c in enumerate(calls)] or None,
        )
        choice = Choice(message=message, finish_reason="tool_calls" if calls else "stop")
        return ChatCompletion(
            id=self.id, created=self.created, model=self.model, choices=[choice], hearth=routed
        )


class StreamedAnswer(Answer):
    """A chat completion sent chunk by chunk as it is produced."""

    def __init__(self, model: str, emit: Emit) -> None:
        super().__init__(model)
        self._emit = emit
        self._prose = ProseOnly()
        self.streamed = ""

    async def on_event(self, event: Event) -> None:
        """Tokens go out as deltas (thinking as `reasoning_content`), tool-call markup never."""
        if not isinstance(event, TokenEvent):
            return
        if event.thinking:
            await self.delta(Delta(reasoning_content=event.text))
        elif piece := self._prose.feed(event.text):
            self.streamed += piece
            await self.delta(Delta(content=piece))

    async def delta(
        self,
        delta: Delta,
        finish: Literal["stop", "tool_calls"] | None = None,
        routed: Routed | None = None,
    ) -> None:
        choice = ChunkChoice(delta=delta, finish_reason=finish)
        chunk = ChatChunk(
            id=self.id, created=self.created, model=self.model, choices=[choice], hearth=routed
        )
        await self._emit(sse(chunk))

    async def finish(self, answer: str, calls: list[ClientToolCall], routed: Routed) -> None:
        """The rest of the answer (the streamed text ends with it), the calls, the end."""
        if answer.startswith(self.streamed):
            rest = answer[len(self.streamed) :]
        else:  # what streamed came before the answer (a round before a plan ran)
            rest = "\n\n" + answer if answer else ""
        out = [ToolCallOut.of(i, c) for i, c in enumerate(calls)] or None
        if rest or out:
            await self.delta(Delta(content=rest or None, tool_calls=out))
        await self.delta(Delta(), "tool_calls" if calls else "stop", routed)
        await self._emit(b"data: [DONE]\n\n")


def conversation(request: ChatRequest) -> list[ChatMessage]:
    """The client's messages as the planner reads them: an assistant's earlier tool calls
    written as the model writes calls, each tool result answering its call."""
    out = []
    for m in request.messages:
        content = m.text()
        if m.tool_calls:
            calls = [
                ToolCall(c.function.name, _arguments(c.function.arguments)) for c in m.tool_calls
            ]
            content = "\n".join(filter(None, [content, render_calls(calls)]))
        role = "system" if m.role == "developer" else m.role
        out.append(
            ChatMessage(role=role, content=content, tool_call_id=m.tool_call_id, name=m.name)
        )
    return out


def _arguments(text: str) -> dict[str, JsonValue]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
        value = None
    if not isinstance(value, dict):
        raise ApiError(
            400, "invalid_input", "a tool call's arguments must be a JSON object", param="messages"
        )
    return value


async def offered(calls: list[ClientToolCall], tools: list[ToolSpec]) -> list[ClientToolCall]:
    """`calls` when each names one of the app's `tools` and fits its schema; a planner
    (the home node may be hostile) never hands an app a tool it did not offer, such as
    the phone's own, nor arguments its schema refuses: `plan_rejected` instead."""
    schemas = {tool.function.name: tool.function.parameters for tool in tools}
    try:
        await validate_calls([ToolCall(c.name, c.arguments) for c in calls], schemas)
    except HearthError as exc:
        raise HearthError(exc.code, f"the planner's tool call: {exc.message}") from None
    return calls


def client_tools(request: ChatRequest) -> list[ToolSpec]:
    """The app's tools, checked as the phone checks any tool's name and schema."""
    specs = []
    for i, tool in enumerate(request.tools):
        try:
            specs.append(ToolSpec.model_validate(tool.model_dump()))
        except ValidationError as exc:
            raise invalid(exc, f"tools.{i}") from exc
    return specs


class OpenAiApi:
    """The `/v1` routes over one `Service`."""

    def __init__(self, service: Service, slots: Slots) -> None:
        self.service = service
        self.slots = slots

    def routes(self) -> list[Route]:
        return [
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
        ]

    async def models(self, request: Request) -> Response:
        cards = ModelList(data=[ModelCard(id=name) for name in MODELS])
        return JSONResponse(cards.model_dump(mode="json"))

    async def chat(self, request: Request) -> Response:
        try:
            release = await self.slots.admit(request)
        except ApiError as exc:
            return error_response(exc)
        try:
            body = await typed_body(request, ChatRequest)
            if body.model not in MODELS:
                raise ApiError(
                    404,
                    "model_not_found",
                    f"no model {body.model[:64]!r}: use one of {', '.join(MODELS)}",
                    param="model",
                )
            tools = client_tools(body)
            messages = conversation(body)
            if not tools and messages[-1].role != "user":
                raise ApiError(
                    400,
                    "invalid_input",
                    "the last message must be the user's (or send `tools`)",
                    param="messages",
                )
        except ApiError as exc:
            release()
            return error_response(exc)
        route = MODELS[body.model]

        async def run(
            events: EventSink, cancel: anyio.Event
        ) -> tuple[str, list[ClientToolCall], Routed]:
            with single_error():
                if tools:
                    done = await self.service.complete(
                        messages, tools, route, events, cancel, body.tool_choice
                    )
                    calls = await offered(done.calls, tools)
                    return done.answer, calls, Routed(route=done.route, reason=done.reason)
                asked = AskRequest(
                    text=messages[-1].content,
                    route=route,
                    tool_choice=body.tool_choice,
                    thinking=body.thinking,
                    confirm="no",
                    history=messages[:-1],
                )
                result = await self.service.ask(asked, events, Scripted(False), cancel)
                routed = Routed(
                    route=result.route,
                    reason=result.reason,
                    request_id=result.request_id,
                    untrusted_sources=result.untrusted_sources,
                )
                return result.answer, [], routed

        if body.stream:

            async def produce(emit: Emit, cancel: anyio.Event) -> None:
                answer = StreamedAnswer(body.model, emit)
                try:
                    await answer.delta(Delta(role="assistant", content=""))
                    await answer.finish(*await run(answer.on_event, cancel))
                except HearthError as exc:
                    await emit(sse(ErrorBody.of(ApiError.of(exc))))
                except Exception:
                    await emit(sse(ErrorBody.of(internal())))
                finally:
                    release()

            return EventStream(produce)

        async def whole(cancel: anyio.Event) -> Response:
            answer = Answer(body.model)
            try:
                completion = answer.whole(*await run(discard, cancel))
            except HearthError as exc:
                return error_response(ApiError.of(exc))
            except Exception:
                return error_response(internal())
            finally:
                release()
            return JSONResponse(completion.model_dump(mode="json", exclude_none=True))

        return Deferred(whole)


def internal() -> ApiError:
    """An unexpected failure, logged with a trace id the client is given."""
    from ..server import internal_error

    event = internal_error()
    return ApiError(500, event.code, event.message)
