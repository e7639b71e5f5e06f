"""The in-process backend: a GGUF loaded once by llama.cpp and shared by every session.

A session keeps its model state between rounds (`SessionMemory`), so a later round
evaluates only what the new messages add; the tools block that requests share is
evaluated once (the runtime's prefix cache).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from pathlib import Path

import anyio

from hearth.protocol.model.callformats import CallFormat
from hearth.protocol.model.chat import split_shared
from hearth.protocol.model.grammar import ToolGrammar
from hearth.protocol.model.inert import Inert
from hearth.protocol.model.micro.files import tool_specs
from hearth.protocol.model.relay import TextRelay, generate_streamed
from hearth.protocol.model.runtime import Generation, LlamaRuntime, SessionMemory
from hearth.protocol.wire.messages import ModelInfo

from . import Conversation, GenerationSettings, OnText, ignore_text


class LlamaCppBackend:
    """A GGUF loaded once in this process and shared by every session."""

    def __init__(self, path: Path, n_ctx: int) -> None:
        self.runtime = LlamaRuntime(path, n_ctx=n_ctx)
        self.template = self.runtime.template
        self.call_format: CallFormat = self.template.call_format
        self.info = ModelInfo(
            name=self.runtime.name,
            quant=self.runtime.quant,
            n_ctx=self.runtime.n_ctx,
            backend="llama-cpp",
            chars_per_token=self._chars_per_token(),
        )

    def _chars_per_token(self) -> float:
        """Characters of tool schemas per token of this model (the phone's tools, as
        JSON), rounded down: what a phone's count of a request's tools divides by."""
        sample = json.dumps(tool_specs())
        ratio = 0.9 * len(sample) / len(self.runtime.tokenize(sample))  # other schemas: denser
        return max(0.5, math.floor(10 * ratio) / 10)

    @functools.cached_property
    def inert(self) -> Inert:
        """What breaks chat-template markers for this model: the common templates' and
        its own special tokens."""
        return Inert(self.runtime.special_texts)

    def render(self, conv: Conversation) -> str:
        """The whole conversation as the model's chat template renders it."""
        return self.template.render(
            conv.openai_messages(), conv.openai_tools(), thinking=conv.thinking, now=conv.now
        )

    def _text_for(self, conv: Conversation) -> tuple[str, str]:
        """(shared prefix, rest) of what the context needs next."""
        if isinstance(conv.memory, SessionMemory):
            suffix = self.template.continuation(
                conv.openai_messages(stop=conv.consumed),
                conv.openai_messages(start=conv.consumed),
                conv.openai_tools(),
                thinking=conv.thinking,
                now=conv.now,
            )
            if suffix is not None:
                return "", suffix
        conv.memory = SessionMemory(scope=conv.scope)  # first round, or history re-rendered
        return split_shared(self.render(conv), conv.now)

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
        prefix, text = self._text_for(conv)
        memory = conv.memory
        assert isinstance(memory, SessionMemory)  # set by `_text_for`

        def work(relay: TextRelay, stopped: Callable[[], bool]) -> Generation:
            return self.runtime.generate(
                memory,
                text,
                grammar=grammar,
                max_tokens=settings.max_tokens,
                sampling=settings.sampling,
                cancelled=stopped,
                on_text=relay.put,
                prefix=prefix,
                thinking_budget=conv.thinking_budget if conv.thinking else None,
                on_thinking=relay.put_thought,
            )

        result = await generate_streamed(work, on_text, on_thinking, cancel)
        conv.consumed = len(conv.messages) + 1  # + the assistant turn the planner appends
        return result

    async def aclose(self) -> None:
        return None
