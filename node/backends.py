"""Model backends behind one small interface: in-process llama.cpp, or an
OpenAI-compatible upstream (vLLM, llama-server, Ollama, llama-cpp-python's server).

Both stream text through `on_text` as it is produced and stop within one token of
`cancel` being set; both take the grammar (the upstream where it accepts one).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx
import trio

from hearth.protocol.model.chat import ChatTemplate
from hearth.protocol.model.runtime import Generation, LlamaRuntime, Sampling, SessionMemory
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ModelInfo

OnText = Callable[[str], Awaitable[None]]
STREAM_INTERVAL_S = 0.015
USER_TURN = "<|im_start|>user"


@dataclass
class Conversation:
    """A plan session's conversation as a backend sees it (OpenAI message format)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    thinking: bool = False
    consumed: int = 0  # messages already in the backend's context (incl. its last answer)
    memory: Any = None  # backend-specific per-session state


class Backend(Protocol):
    """What the planner needs from a model."""

    info: ModelInfo

    async def generate(
        self,
        conv: Conversation,
        *,
        grammar: str | None,
        max_tokens: int,
        on_text: OnText,
        cancel: anyio.Event,
        sampling: Sampling,
    ) -> Generation: ...

    async def aclose(self) -> None: ...


class LlamaCppBackend:
    """A GGUF loaded once in this process and shared by every session."""

    def __init__(self, path: Path, n_ctx: int) -> None:
        self.runtime = LlamaRuntime(path, n_ctx=n_ctx)
        self.template = ChatTemplate(self.runtime.chat_template)
        self.info = ModelInfo(
            name=self.runtime.name,
            quant=self.runtime.quant,
            n_ctx=self.runtime.n_ctx,
            backend="llama-cpp",
        )

    def _text_for(self, conv: Conversation) -> tuple[str, str]:
        """(shared prefix, rest) of what the context needs next."""
        if isinstance(conv.memory, SessionMemory):
            suffix = self.template.continuation(
                conv.messages[: conv.consumed],
                conv.messages[conv.consumed :],
                conv.tools,
                thinking=conv.thinking,
            )
            if suffix is not None:
                return "", suffix
        conv.memory = SessionMemory()  # first round, or the template re-renders history
        full = self.template.render(conv.messages, conv.tools, thinking=conv.thinking)
        # everything before the first user turn (system prompt, tool schemas) is shared
        prefix, sep, rest = full.partition(USER_TURN)
        return (prefix, sep + rest) if sep else ("", full)

    async def generate(
        self,
        conv: Conversation,
        *,
        grammar: str | None,
        max_tokens: int,
        on_text: OnText,
        cancel: anyio.Event,
        sampling: Sampling,
    ) -> Generation:
        prefix, text = self._text_for(conv)
        stop = threading.Event()
        relay = _TextRelay(trio.lowlevel.current_trio_token())

        def work() -> Generation:
            try:
                return self.runtime.generate(
                    conv.memory,
                    text,
                    grammar=grammar,
                    max_tokens=max_tokens,
                    sampling=sampling,
                    cancelled=stop.is_set,
                    on_text=relay.put,
                    prefix=prefix,
                )
            finally:
                relay.close()

        result: list[Generation] = []

        async def run() -> None:
            result.append(await anyio.to_thread.run_sync(work))

        async def watch_cancel() -> None:
            await cancel.wait()
            stop.set()

        with single_error():
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                tg.start_soon(watch_cancel)
                async with relay.wakeups:
                    async for _ in relay.wakeups:
                        if text_now := relay.take():
                            await on_text(text_now)
                tg.cancel_scope.cancel()  # the worker is done; stop the cancel watcher
        conv.consumed = len(conv.messages) + 1  # + the assistant turn the planner appends
        return result[0]

    async def aclose(self) -> None:
        return None


class _TextRelay:
    """Text from the generating thread to the event loop, with as few wake-ups as
    possible: the first piece at once, then at most one wake-up per interval. Each
    wake-up costs the token loop GIL hand-overs; a frame costs more than a token."""

    def __init__(self, loop: trio.lowlevel.TrioToken) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._last = 0.0
        self._send, self.wakeups = anyio.create_memory_object_stream[None](1)

    def put(self, piece: str) -> None:  # generating thread
        with self._lock:
            self._pending.append(piece)
            now = time.monotonic()
            if now - self._last < STREAM_INTERVAL_S:
                return
            self._last = now
        self._loop.run_sync_soon(self._wake)

    def close(self) -> None:  # generating thread, at the end
        self._loop.run_sync_soon(self._wake)
        self._loop.run_sync_soon(self._send.close)

    def _wake(self) -> None:
        # the session may have ended (its receiver gone) while this was scheduled
        with contextlib.suppress(
            anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            self._send.send_nowait(None)

    def take(self) -> str:
        with self._lock:
            text, self._pending = "".join(self._pending), []
        return text


@dataclass
class OpenAIUpstream:
    """An OpenAI-compatible chat-completions server the owner already runs."""

    url: str
    model: str = ""
    info: ModelInfo = field(init=False)
    _client: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if not self.url.endswith("/v1"):
            self.url += "/v1"
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=5))
        self.info = ModelInfo(name=self.model or "upstream", backend="openai-compatible")

    async def generate(
        self,
        conv: Conversation,
        *,
        grammar: str | None,
        max_tokens: int,
        on_text: OnText,
        cancel: anyio.Event,
        sampling: Sampling,
    ) -> Generation:
        body: dict[str, Any] = {
            "model": self.model or "default",
            "messages": conv.messages,
            "stream": True,
            "max_tokens": max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "seed": sampling.seed,
            "repeat_penalty": sampling.repeat_penalty,
            "top_k": sampling.top_k,
            "min_p": sampling.min_p,
        }
        if conv.tools:
            body["tools"] = conv.tools
        if grammar:
            body["grammar"] = grammar  # llama-cpp-python's server and llama-server take it
        pieces: list[str] = []
        finish = "length"
        try:
            async with self._client.stream(
                "POST", f"{self.url}/chat/completions", json=body
            ) as response:
                if response.status_code != 200:
                    detail = (await response.aread())[:300].decode(errors="replace")
                    raise HearthError(
                        ErrorCode.MODEL_NOT_LOADED,
                        f"upstream answered {response.status_code}: {detail}",
                    )
                async for line in response.aiter_lines():
                    if cancel.is_set():
                        finish = "cancelled"
                        break
                    if not line.startswith("data:") or line.strip() == "data: [DONE]":
                        continue
                    choice = json.loads(line[5:])["choices"][0]
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if piece:
                        pieces.append(piece)
                        await on_text(piece)
                    if choice.get("finish_reason"):
                        finish = "stop" if choice["finish_reason"] == "stop" else "length"
        except httpx.HTTPError as exc:
            raise HearthError(
                ErrorCode.MODEL_NOT_LOADED,
                f"upstream {self.url} unreachable ({type(exc).__name__})",
            ) from exc
        conv.consumed = len(conv.messages) + 1
        return Generation("".join(pieces), len(pieces), finish, 0)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        await self._client.aclose()
