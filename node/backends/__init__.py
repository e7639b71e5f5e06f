"""Model backends behind one small interface (`Backend`), one module each:
`llamacpp` (a GGUF in this process), `upstream` (an OpenAI-compatible server the owner
runs) and `scripted` (plays scripted answers: the planner's tests need no model file).

Every backend streams text through `on_text` as it is produced, stops within one token
of `cancel` being set, and takes the round's `ToolGrammar` (the upstream where it
accepts one). A new backend is a module here implementing `Backend`, chosen by
`load_backend` from the node's configuration.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from hearth.protocol.model.callformats import CallFormat
from hearth.protocol.model.grammar import ToolGrammar
from hearth.protocol.model.runtime import Generation, Sampling
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, ModelInfo, ToolSpec

if TYPE_CHECKING:
    from hearth.node.config import NodeConfig

__all__ = [
    "Backend",
    "Conversation",
    "GenerationSettings",
    "OnText",
    "ignore_text",
    "load_backend",
]

OnText = Callable[[str], Awaitable[None]]
OpenAIObject = dict[str, Any]  # one message or tool in OpenAI's JSON form


async def ignore_text(_: str) -> None:
    """An `OnText` that drops what it is given."""
    return None


@dataclass
class Conversation:
    """A plan session's conversation as a backend sees it."""

    messages: list[ChatMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    thinking: bool = False
    thinking_budget: int = 1024  # tokens for the thinking block, when `thinking`
    consumed: int = 0  # messages already in the backend's context (incl. its last answer)
    memory: object = None  # the backend's own per-session state (llama.cpp: its SessionMemory)
    scope: str = ""  # who asks (a phone's peer id): model state kept from its prompts is its own
    now: str | None = None  # the phone's time, as every prompt states it (`chat.phone_time`)

    def openai_messages(self, start: int = 0, stop: int | None = None) -> list[OpenAIObject]:
        """`messages[start:stop]` in OpenAI's JSON form (what chat templates and
        OpenAI-compatible servers read)."""
        return [m.model_dump(exclude_none=True) for m in self.messages[start:stop]]

    def openai_tools(self) -> list[OpenAIObject]:
        """The tools in OpenAI's JSON form."""
        return [t.model_dump() for t in self.tools]


@dataclass(frozen=True)
class GenerationSettings:
    """How one round generates: at most `max_tokens` answer tokens, sampled by `sampling`."""

    max_tokens: int
    sampling: Sampling = field(default_factory=Sampling)


class Backend(Protocol):
    """What the planner needs from a model."""

    info: ModelInfo
    call_format: CallFormat  # how its model writes a tool call (the grammar and parser follow)

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
        """One round: answer text streams to `on_text`, a thinking block to `on_thinking`
        (progress, never part of the answer). Sets `conv.consumed` to the messages the
        backend's context holds once the planner appends this answer."""
        ...

    async def aclose(self) -> None:
        """Release what the backend holds (connections; a loaded model stays loaded)."""
        ...


async def load_backend(config: NodeConfig) -> Backend | None:
    """The configured model backend, or None (the node then answers model_not_loaded)."""
    given = {"--model": config.model, "--upstream": config.upstream, "--script": config.script}
    chosen = [flag for flag, value in given.items() if value]
    if len(chosen) > 1:
        which = " or ".join(chosen) + (", not both" if len(chosen) == 2 else ", only one")
        raise HearthError(ErrorCode.INVALID_INPUT, f"use {which}")
    if config.script:  # a test's exact plans, played by the scripted backend
        from .scripted import script_backend

        script = Path(config.script).expanduser()
        return await anyio.to_thread.run_sync(script_backend, script, config.n_ctx)
    if config.model:
        from .llamacpp import LlamaCppBackend

        path = Path(config.model).expanduser()
        if not path.is_file():
            raise HearthError(ErrorCode.INVALID_INPUT, f"no model file at {path}")
        return await anyio.to_thread.run_sync(LlamaCppBackend, path, config.n_ctx)
    if config.upstream:
        from .upstream import OpenAIUpstream

        return OpenAIUpstream(config.upstream, config.upstream_model)
    return None
