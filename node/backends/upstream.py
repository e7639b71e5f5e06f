"""An OpenAI-compatible chat-completions server as the node's backend (vLLM,
llama-server, Ollama, llama-cpp-python's server): the owner's own server plans.

Streams the answer over server-sent events; httpx is imported when this backend is
first used, so a node on llama.cpp never loads it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import anyio

from hearth.protocol.model.callformats import QWEN_XML, CallFormat
from hearth.protocol.model.chat import with_time_line
from hearth.protocol.model.grammar import AnswerGrammar, ToolGrammar
from hearth.protocol.model.runtime import Finish, Generation
from hearth.protocol.model.toolcalls import CALL_CLOSE, CALL_OPEN
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ModelInfo

from . import Conversation, GenerationSettings, OnText, ignore_text
from .streaming import Batches

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)
MAX_CHARS_PER_TOKEN = 64  # an upstream's stream is cut past max_tokens times this
MAX_STREAM_LINE = 1 << 20  # bytes in one line of an upstream's event stream


class _Style(Enum):
    """How an upstream takes a forcing grammar, learned from its first refusal."""

    GRAMMAR = "tools and grammar"  # llama-cpp-python's server
    GRAMMAR_ALONE = "grammar with tool_choice none"  # llama-server: no grammar with tools
    NATIVE = "tool_choice required"  # a server that takes no grammar at all


_NEXT_STYLE = {_Style.GRAMMAR: _Style.GRAMMAR_ALONE, _Style.GRAMMAR_ALONE: _Style.NATIVE}


@dataclass
class _Stream:
    """What one streamed answer held."""

    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)  # by index
    chars: int = 0
    pieces: int = 0
    finish: Finish = "length"
    usage: dict[str, Any] = field(default_factory=dict)


class _Refused(Exception):
    """The upstream answered 400 about the grammar: try the next style."""


@dataclass
class OpenAIUpstream:
    """An OpenAI-compatible chat-completions server the owner already runs.

    A round that forces calls (a non-lazy grammar) sends the grammar with the tools
    (llama-cpp-python's server); llama-server refuses that (400), so it gets the
    grammar with `tool_choice: "none"` (it still renders the tools); a server that
    takes no grammar gets `tool_choice: "required"`. A round where calls are optional
    (a lazy grammar) uses the server's own tool calling (`tool_choice: "auto"`): no
    server takes a lazy custom grammar over HTTP (both apply it from the first token).
    Calls come back as `tool_calls` or as the model's own `<tool_call>` text; either
    way the planner parses and validates them as it does in-process output.
    A connection the server's keep-alive dropped is retried once, before any text.
    """

    url: str
    model: str = ""
    info: ModelInfo = field(init=False)
    _client: httpx.AsyncClient = field(init=False)
    _style: _Style = field(init=False, default=_Style.GRAMMAR)
    # the grammar forces Qwen3.5 XML, native calls come back as Hermes JSON: both are read
    call_format: CallFormat = field(init=False, default=QWEN_XML)

    def __post_init__(self) -> None:
        import httpx

        self.url = self.url.rstrip("/")
        if not self.url.endswith("/v1"):
            self.url += "/v1"
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=5))
        self.info = ModelInfo(name=self.model or "upstream", backend="openai-compatible")

    async def generate(
        self,
        conv: Conversation,
        *,
        grammar: ToolGrammar | None,
        settings: GenerationSettings,
        on_text: OnText,
        cancel: anyio.Event,
        on_thinking: OnText = ignore_text,
    ) -> Generation:
        forcing = grammar is not None and not grammar.lazy
        while True:
            body = self._body(conv, grammar if forcing else None, settings)
            if grammar is None:
                body["tool_choice"] = "none"
            try:
                got = await self._stream(body, settings.max_tokens, (on_text, on_thinking), cancel)
                break
            except _Refused as refused:
                if not forcing or self._style is _Style.NATIVE:
                    raise HearthError(
                        ErrorCode.INVALID_INPUT,
                        f"upstream {self.url} refused a grammar in every form: {refused}",
                    ) from None
                self._style = _NEXT_STYLE[self._style]
        calls = ""
        if got.finish != "cancelled":
            calls = "".join(_call_text(c) for _, c in sorted(got.calls.items()))
        if calls:
            await on_text(calls)
        conv.consumed = len(conv.messages) + 1
        return Generation(
            "".join(got.text) + calls,
            int(got.usage.get("completion_tokens") or got.pieces),
            got.finish,
            int(got.usage.get("prompt_tokens") or 0),
            thinking="".join(got.thinking),
        )

    def _body(
        self, conv: Conversation, grammar: ToolGrammar | None, settings: GenerationSettings
    ) -> dict[str, Any]:
        sampling = settings.sampling
        body: dict[str, Any] = {
            "model": self.model or "default",
            "messages": (  # the server renders its template: the time is one system line
                with_time_line(conv.openai_messages(), conv.now)
                if conv.now
                else conv.openai_messages()
            ),
            "stream": True,
            "stream_options": {"include_usage": True},  # token counts in the last chunk
            "max_tokens": settings.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "seed": sampling.seed,
            "repeat_penalty": sampling.repeat_penalty,
            "top_k": sampling.top_k,
            "min_p": sampling.min_p,
            "frequency_penalty": sampling.frequency_penalty,
            "presence_penalty": sampling.presence_penalty,
            # the template's thinking switch (llama-server; others ignore it)
            "chat_template_kwargs": {"enable_thinking": conv.thinking},
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if conv.tools:
            body["tools"] = conv.openai_tools()
        if isinstance(grammar, AnswerGrammar) and self._style is _Style.NATIVE:
            body["tool_choice"] = "none"  # a JSON answer: by the server's own JSON mode
            schema = {"name": "answer", "schema": grammar.schema, "strict": True}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif grammar is not None and self._style is _Style.NATIVE:
            body["tool_choice"] = "required"
        elif grammar is not None:
            body["grammar"] = str(grammar)
            if self._style is _Style.GRAMMAR_ALONE:
                body["tool_choice"] = "none"
        return body

    async def _stream(
        self,
        body: dict[str, Any],
        max_tokens: int,
        sinks: tuple[OnText, OnText],  # (answer text, thinking)
        cancel: anyio.Event,
    ) -> _Stream:
        import httpx

        got = _Stream()
        try:
            try:
                await self._read(body, got, max_tokens, sinks, cancel)
            except httpx.RemoteProtocolError:
                if got.pieces:
                    raise
                log.info("upstream %s closed a kept-alive connection: retrying once", self.url)
                got = _Stream()
                await self._read(body, got, max_tokens, sinks, cancel)
        except httpx.RemoteProtocolError as exc:
            raise HearthError(
                ErrorCode.UNREACHABLE, f"upstream {self.url} dropped the connection ({exc})"
            ) from exc
        except httpx.TimeoutException as exc:
            raise HearthError(
                ErrorCode.TIMED_OUT, f"upstream {self.url} timed out ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise HearthError(
                ErrorCode.UNREACHABLE,
                f"upstream {self.url} unreachable ({type(exc).__name__}: {exc})",
            ) from exc
        return got

    async def _read(
        self,
        body: dict[str, Any],
        got: _Stream,
        max_tokens: int,
        sinks: tuple[OnText, OnText],
        cancel: anyio.Event,
    ) -> None:
        budget = max_tokens * MAX_CHARS_PER_TOKEN  # a server that never stops is cut
        async with self._client.stream(
            "POST", f"{self.url}/chat/completions", json=body
        ) as response:
            if response.status_code != 200:
                detail = (await response.aread())[:300].decode(errors="replace")
                if response.status_code == 400 and "grammar" in detail.lower():
                    raise _Refused(detail)
                code = (
                    ErrorCode.MODEL_NOT_LOADED
                    if response.status_code in (404, 503)
                    else ErrorCode.INTERNAL
                )
                raise HearthError(code, f"upstream answered {response.status_code}: {detail}")
            batches = Batches(sinks)
            async for payloads in _sse_data(response):
                for data in payloads:
                    if cancel.is_set():
                        got.finish = "cancelled"
                        return
                    if data != b"[DONE]":
                        await self._take(_chunk(data), got, batches)
                    if got.chars > budget:
                        got.finish = "length"
                        await batches.flush()
                        return
            await batches.flush()

    @staticmethod
    async def _take(chunk: dict[str, Any], got: _Stream, batches: Batches) -> None:
        """One parsed stream chunk into `got`; its text and thinking to `batches`."""
        got.usage = chunk.get("usage") or got.usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            got.chars += sum(len(v) for v in _strings(delta))
            if piece := _text(delta.get("reasoning_content")):
                got.thinking.append(piece)
                await batches.add(piece, thought=True)
            if piece := _text(delta.get("content")):
                got.text.append(piece)
                got.pieces += 1
                await batches.add(piece, thought=False)
            for call in delta.get("tool_calls") or []:
                _add_call(got.calls, call)
                got.pieces += 1
            if reason := choice.get("finish_reason"):
                got.finish = "length" if reason == "length" else "stop"

    async def aclose(self) -> None:
        await self._client.aclose()


async def _sse_data(response: httpx.Response) -> AsyncIterator[list[bytes]]:
    """The `data:` payloads of a server-sent event stream, as a list per chunk read (the
    lines it completed, found by one split of the read's bytes). A line longer than
    `MAX_STREAM_LINE` is a protocol error, so a server cannot grow the buffer."""
    buffer = bytearray()
    async for chunk in response.aiter_bytes():
        buffer += chunk
        end = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))  # SSE ends lines either way
        if end < 0:
            if len(buffer) > MAX_STREAM_LINE:
                raise HearthError(ErrorCode.PROTOCOL_ERROR, "upstream sent an over-long line")
            continue
        lines = bytes(buffer[:end]).splitlines()  # bytes: at \r\n, \r and \n only
        del buffer[: end + 1]
        if any(len(line) > MAX_STREAM_LINE for line in lines) or len(buffer) > MAX_STREAM_LINE:
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "upstream sent an over-long line")
        yield [line[5:].strip() for line in lines if line.startswith(b"data:")]
    if buffer.startswith(b"data:"):  # a last line without its newline
        yield [bytes(buffer[5:]).strip()]


def _chunk(data: bytes) -> dict[str, Any]:
    try:
        chunk = json.loads(data.decode(errors="replace"))
    except json.JSONDecodeError as exc:
        raise HearthError(
            ErrorCode.PROTOCOL_ERROR, "upstream sent a malformed stream line"
        ) from exc
    if not isinstance(chunk, dict):
        raise HearthError(ErrorCode.PROTOCOL_ERROR, "upstream sent a stream line that is no object")
    return chunk


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value (what a delta carries, whatever its shape)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _add_call(calls: dict[int, dict[str, str]], delta: Any) -> None:
    """One streamed `tool_calls` delta: the name comes once, the arguments in pieces."""
    if not isinstance(delta, dict):
        return
    index = delta.get("index")
    call = calls.setdefault(
        index if isinstance(index, int) else len(calls), {"name": "", "arguments": ""}
    )
    function = delta.get("function")
    function = function if isinstance(function, dict) else {}
    call["name"] += _text(function.get("name"))
    call["arguments"] += _text(function.get("arguments"))


def _call_text(call: dict[str, str]) -> str:
    """A native call as the model's own `<tool_call>` JSON form, for the planner's
    parser: arguments that are no JSON object stay a string (the parser rejects them);
    `<`, `>` and `&` are escaped so no value can close the call early."""
    try:
        arguments: Any = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError:
        arguments = call["arguments"]
    body = json.dumps({"name": call["name"], "arguments": arguments}, ensure_ascii=False)
    for ch, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        body = body.replace(ch, escaped)
    return f"{CALL_OPEN}\n{body}\n{CALL_CLOSE}\n"
