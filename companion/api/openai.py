"""The OpenAI-compatible API: `GET /v1/models[/{id}]` and `POST /v1/chat/completions`.

Models: `hearth` (routed), `hearth-local` (the phone's model), `hearth-home` (the home
node). Without client `tools` a request is an ask of the phone's assistant: its own
tools run through the executor, and every confirmation is answered "no" (an OpenAI
client cannot answer one; the native API can). With client `tools`, the calls come
back as standard `tool_calls` (finish_reason "tool_calls") for the app to run, and its
`tool` messages come back in `messages`. Streaming is OpenAI's server-sent events;
errors are OpenAI's error object. Every documented request field is honoured or
refused (`chat_request`); every answer has `usage`, counted where it was generated.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hearth.protocol.model.prose import ProseOnly
from hearth.protocol.model.toolcalls import ToolCall, render_calls
from hearth.protocol.model.validate import validate_calls
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, ToolSpec

from ..ask import ask
from ..commands import internal_error
from ..completion import complete, cut_by_the_limit
from ..confirm import Scripted
from ..events import AskRequest, Event, EventSink, RouteEvent, StepEvent, TokenEvent, discard
from ..results import ClientToolCall, UsageView
from .chat_request import ChatRequest, NamedTool
from .errors import ApiError, invalid, typed_body
from .streams import Deferred, Emit, EventStream, Slots

if TYPE_CHECKING:
    from ..service import Service

Routing = Literal["auto", "local", "remote"]
MODELS: dict[str, Routing] = {"hearth": "auto", "hearth-local": "local", "hearth-home": "remote"}
Finish = Literal["stop", "length", "tool_calls"]


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
    finish_reason: Finish
    logprobs: None = None


class Routed(_Out):
    """Where Hearth answered (an extension field; OpenAI clients ignore it)."""

    route: Literal["local", "remote"]
    reason: str
    request_id: str | None = None
    conversation_id: str | None = None  # the conversation the turn was kept in
    untrusted_sources: list[str] = Field(default_factory=list)
    """What the answer's planner read that anyone could have written (a web page, a
    message, a document): an answer written after it says so, as every output does."""


@dataclass
class Outcome:
    """What one request came to: the answer or the calls, where, what it cost, why it ended."""

    answer: str
    calls: list[ClientToolCall]
    routed: Routed
    usage: UsageView
    finish: Literal["stop", "length"]

    @property
    def reason(self) -> Finish:
        """`length` whenever the token limit ended it (with the calls complete by then)."""
        if self.finish == "length":
            return "length"
        return "tool_calls" if self.calls else "stop"


class ChatCompletion(_Out):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: UsageView
    system_fingerprint: str  # the seed sampled with (`seed-N`): send `seed` N to repeat it
    hearth: Routed


class Delta(_Out):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None  # thinking, as llama.cpp's and vLLM's servers send it
    tool_calls: list[ToolCallOut] | None = None


class ChunkChoice(_Out):
    index: int = 0
    delta: Delta
    finish_reason: Finish | None = None


class ChatChunk(_Out):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageView | None = None  # the last chunk's, with `stream_options.include_usage`
    system_fingerprint: str
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
    param: str | None
    code: str


class ErrorBody(_Out):
    error: ErrorDetail

    @classmethod
    def of(cls, exc: ApiError) -> ErrorBody:
        kind = "server_error" if exc.status >= 500 else "invalid_request_error"
        return cls(
            error=ErrorDetail(
                message=exc.message,
                type=kind,
                param=exc.param,
                code=exc.code,
            )
        )


# the runtime's words for a request that does not fit the model's context
OVERFLOW = re.compile(r"request needs \d+ tokens; the model's context is \d+")


def api_error(exc: HearthError) -> ApiError:
    """`exc` as the API answers it; a request past the model's context is OpenAI's
    `context_length_exceeded` (param `messages`), not the runtime's `invalid_input`."""
    error = ApiError.of(exc)
    if exc.code is ErrorCode.INVALID_INPUT and OVERFLOW.search(exc.message):
        error.code, error.param = "context_length_exceeded", "messages"
    return error


def error_response(exc: ApiError) -> JSONResponse:
    body = ErrorBody.of(exc).model_dump(mode="json")
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


def sse(model: BaseModel, *, null_usage: bool = False) -> bytes:
    """One event; with `null_usage`, a chunk without usage says `"usage": null` (as
    OpenAI's do with `stream_options.include_usage`)."""
    if not null_usage:
        return b"data: " + model.model_dump_json(exclude_none=True).encode() + b"\n\n"
    body = model.model_dump(mode="json", exclude_none=True)
    body.setdefault("usage", None)
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


def sse_error(exc: ApiError) -> bytes:
    """An error inside a stream, in OpenAI's shape (`param` kept, null or not)."""
    return b"data: " + ErrorBody.of(exc).model_dump_json().encode() + b"\n\n"


class Answer:
    """One chat completion: its id and model, the seed it samples with (reported as its
    `system_fingerprint`), and the whole of it once it is known."""

    def __init__(self, model: str, seed: int) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.fingerprint = f"seed-{seed}"

    def whole(self, done: Outcome) -> ChatCompletion:
        message = AssistantMessage(
            content=done.answer or (None if done.calls else ""),
            tool_calls=[ToolCallOut.of(i, c) for i, c in enumerate(done.calls)] or None,
        )
        return ChatCompletion(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=[Choice(message=message, finish_reason=done.reason)],
            usage=done.usage,
            system_fingerprint=self.fingerprint,
            hearth=done.routed,
        )


class StreamedAnswer(Answer):
    """A chat completion sent chunk by chunk as it is produced."""

    def __init__(self, model: str, seed: int, emit: Emit, include_usage: bool) -> None:
        super().__init__(model, seed)
        self._emit = emit
        self._prose = ProseOnly()
        self._include_usage = include_usage
        self._space = ""  # whitespace held back: sent only once more text follows it
        self.streamed = ""

    async def on_event(self, event: Event) -> None:
        """Tokens go out as deltas (thinking as `reasoning_content`), tool-call markup never.
        Whitespace at either end is held back, as the whole answer has none there."""
        if not isinstance(event, TokenEvent):
            return
        if event.thinking:
            await self.delta(Delta(reasoning_content=event.text))
        elif piece := self._prose.feed(event.text):
            text = self._space + piece if self.streamed else piece.lstrip()
            body = text.rstrip()
            self._space = text[len(body) :]
            if body:
                self.streamed += body
                await self.delta(Delta(content=body))

    async def delta(
        self, delta: Delta, finish: Finish | None = None, routed: Routed | None = None
    ) -> None:
        await self.chunk([ChunkChoice(delta=delta, finish_reason=finish)], routed=routed)

    async def chunk(
        self,
        choices: list[ChunkChoice],
        usage: UsageView | None = None,
        routed: Routed | None = None,
    ) -> None:
        chunk = ChatChunk(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=choices,
            usage=usage,
            system_fingerprint=self.fingerprint,
            hearth=routed,
        )
        await self._emit(sse(chunk, null_usage=self._include_usage))

    async def finish(self, done: Outcome) -> None:
        """The rest of the answer (the streamed text ends with it), the calls, the end,
        and the usage when the client asked for it (a last chunk without choices)."""
        if done.answer.startswith(self.streamed):
            rest = done.answer[len(self.streamed) :]
        else:  # what streamed came before the answer (a round before a plan ran)
            rest = "\n\n" + done.answer if done.answer else ""
        out = [ToolCallOut.of(i, c) for i, c in enumerate(done.calls)] or None
        if rest or out:
            await self.delta(Delta(content=rest or None, tool_calls=out))
        await self.delta(Delta(), done.reason, done.routed)
        if self._include_usage:
            await self.chunk([], usage=done.usage)
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
    """The app's tools, checked as the phone checks any tool's name and schema; with a
    named `tool_choice`, that one alone (which must be among them)."""
    specs = []
    for i, tool in enumerate(request.tools):
        try:
            specs.append(ToolSpec.model_validate(tool.model_dump()))
        except ValidationError as exc:
            raise invalid(exc, f"tools.{i}") from exc
    if isinstance(request.tool_choice, NamedTool):
        name = request.tool_choice.function.name
        specs = [spec for spec in specs if spec.function.name == name]
        if not specs:
            raise ApiError(
                400, "invalid_input", f"tool_choice names {name[:64]!r}, not among `tools`",
                param="tool_choice",
            )  # fmt: skip
    return specs


def checked(body: ChatRequest) -> tuple[list[ToolSpec], list[ChatMessage]]:
    """The request's tools and messages, or the 400/404 that refuses it."""
    body.refuse_unsupported()
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
    return tools, messages


class OpenAiApi:
    """The `/v1` routes over one `Service`."""

    def __init__(self, service: Service, slots: Slots) -> None:
        self.service = service
        self.slots = slots

    def routes(self) -> list[Route]:
        return [
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
        ]

    async def models(self, request: Request) -> Response:
        cards = ModelList(data=[ModelCard(id=name) for name in MODELS])
        return JSONResponse(cards.model_dump(mode="json"))

    async def model(self, request: Request) -> Response:
        name = request.path_params["model_id"]
        if name not in MODELS:
            return error_response(
                ApiError(404, "model_not_found", f"no model {name[:64]!r}", param="model")
            )
        return JSONResponse(ModelCard(id=name).model_dump(mode="json"))

    async def chat(self, request: Request) -> Response:
        try:
            ticket = await self.slots.admit(request)
        except ApiError as exc:
            return error_response(exc)
        try:
            body = await typed_body(request, ChatRequest)
            tools, messages = checked(body)
        except ApiError as exc:
            ticket.release()
            return error_response(exc)
        route = MODELS[body.model]
        seed = body.drawn_seed()  # a fresh one unless the request names it
        generation = body.settings(seed)

        async def run(events: EventSink, cancel: anyio.Event) -> Outcome:
            with single_error():
                if tools:
                    done = await complete(
                        self.service,
                        messages,
                        tools,
                        route,
                        events,
                        cancel,
                        body.choice,
                        generation,
                        body.parallel_tool_calls,
                    )
                    calls = await offered(done.calls, tools)
                    routed = Routed(route=done.route, reason=done.reason)
                    return Outcome(done.answer, calls, routed, done.usage, done.finish)
                conversation_id = body.conversation
                asked = AskRequest(
                    text=messages[-1].content,
                    route=route,
                    # a JSON answer is the model's own: the phone's tools are not offered
                    tool_choice="none" if generation.json_answer else body.choice,
                    thinking=body.thinking,
                    confirm="no",
                    history=messages[:-1],
                    generation=generation,
                    conversation_id=conversation_id,
                    source="user" if conversation_id else "api",
                )
                routes: list[RouteEvent] = []  # where it went, as the ask announced it
                ran: list[str] = []  # the tools whose steps ran before a cut (their results)

                async def hear(event: Event) -> None:
                    if isinstance(event, RouteEvent):
                        routes.append(event)
                    if isinstance(event, StepEvent) and event.status != "running":
                        ran.append(event.tool)
                    await events(event)

                try:
                    result = await ask(self.service, asked, hear, Scripted(False), cancel)
                except HearthError as exc:
                    if not cut_by_the_limit(exc):
                        raise
                    return cut_short(routes[-1].route if routes else route, ran)
                routed = Routed(
                    route=result.route,
                    reason=result.reason,
                    request_id=result.request_id,
                    conversation_id=result.conversation_id,
                    untrusted_sources=result.untrusted_sources,
                )
                return Outcome(result.answer, [], routed, result.usage, result.finish)

        if body.streamed:

            async def produce(emit: Emit, cancel: anyio.Event) -> None:
                answer = StreamedAnswer(body.model, seed, emit, body.include_usage)
                try:
                    await answer.delta(Delta(role="assistant", content=""))
                    await answer.finish(await run(answer.on_event, cancel))
                except HearthError as exc:
                    await emit(sse_error(api_error(exc)))
                except Exception:
                    await emit(sse_error(internal()))

            return EventStream(produce, ticket)

        async def whole(cancel: anyio.Event) -> Response:
            answer = Answer(body.model, seed)
            try:
                completion = answer.whole(await run(discard, cancel))
            except HearthError as exc:
                return error_response(api_error(exc))
            except Exception:
                return error_response(internal())
            return JSONResponse(completion.model_dump(mode="json", exclude_none=True))

        return Deferred(whole, ticket)


def cut_short(route: Routing, ran: list[str]) -> Outcome:
    """An ask whose last plan the token limit cut inside a tool call: none of that
    plan's calls ran (a cut plan never runs), and the answer says `length`; its tokens
    are not known here. The steps of earlier rounds (`ran`, their tools) did run: what
    the planner wrote after reading their results is labelled with every one of them
    (their own labels went with the failed ask: counted long, never dropped)."""
    where: Literal["local", "remote"] = "remote" if route == "remote" else "local"
    done = f"; {len(ran)} earlier step(s) ran" if ran else ""
    routed = Routed(
        route=where,
        reason=f"the token limit cut a tool call: that call did not run{done}",
        untrusted_sources=sorted({f"{tool} result" for tool in ran}),
    )
    return Outcome("", [], routed, UsageView(), "length")


def internal() -> ApiError:
    """An unexpected failure, logged with a trace id the client is given."""
    return ApiError.of(internal_error())
