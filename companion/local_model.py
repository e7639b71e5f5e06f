"""The phone's own model: a Q4 GGUF through the shared model layer, loaded lazily,
kept warm (one load per process), memory-mapped. Same template, grammar, parsing
and validation as the home node; its plans run through the same executor."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from hearth.protocol.model.chat import split_shared
from hearth.protocol.model.grammar import Mode, answer_grammar, tool_grammar
from hearth.protocol.model.inert import Inert
from hearth.protocol.model.limits import Sampling, answer_tokens, requested
from hearth.protocol.model.relay import TextRelay, generate_streamed
from hearth.protocol.model.toolcalls import parse_generation
from hearth.protocol.model.validate import check_schemas, validate_calls
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import (
    AnswerSettings,
    ChatMessage,
    Limits,
    Plan,
    PlanStep,
    ToolSpec,
    Usage,
)

if TYPE_CHECKING:  # llama.cpp and numpy load on first local use, not at every start
    from hearth.protocol.model.runtime import Generation, LlamaRuntime


LOCAL_LIMITS = Limits(max_steps=8, max_tokens=384)
OnText = Callable[[str, bool], Awaitable[None]]  # a piece of text, whether it is thinking


def local_plan(phone_id: str, calls: Sequence[tuple[str, dict[str, Any]]]) -> Plan:
    """The plan the phone's own model made of its tool `calls` (tool, arguments): signed
    by and for the phone itself, steps `s1`, `s2`, ... in order, good for five minutes."""
    now = time.time()
    return Plan(
        plan_id=uuid.uuid4().hex,
        signer=phone_id,
        audience=phone_id,
        session_id="local",
        round=1,
        request_id="local",
        request_hash=bytes(32),
        transcript_hash=bytes(32),
        issued_at=now,
        expires_at=now + 300,
        steps=[
            PlanStep(id=f"s{i}", tool=tool, arguments=arguments)
            for i, (tool, arguments) in enumerate(calls, 1)
        ],
    )


@dataclass
class LocalResult:
    answer: str
    plan: Plan | None
    tokens: int
    confidence: float | None = None
    thinking: str = ""  # the thinking block, when the request asked for one
    usage: Usage = field(default_factory=Usage)  # the prompt's (cached prefix too), the answer's
    truncated: bool = False  # the token limit cut the answer
    prompt_evaluated: int = 0  # prompt tokens evaluated for it (a cached prefix is not)


class LocalModel:
    """The phone's model, loaded on first use."""

    def __init__(
        self, path: Path | None, n_ctx: int = 8192, sampling: Sampling | None = None
    ) -> None:
        self.path = path
        self.n_ctx = n_ctx
        self.sampling = sampling  # None: the model's own recommended settings
        self._runtime: LlamaRuntime | None = None
        self._inert: Inert | None = None
        self._loading = anyio.Lock()  # one load, however many requests wait for it

    async def runtime(self) -> LlamaRuntime:
        """The model as loaded (a file moved or replaced since changes nothing until the
        process loads it again); loaded now if it was not."""
        if self._runtime is not None:
            return self._runtime
        if self.path is None or not self.path.is_file():
            missing = "no local model" if self.path is None else f"no model file at {self.path}"
            raise HearthError(
                ErrorCode.MODEL_NOT_LOADED,
                f"{missing}: set one with `hearth config set model PATH` (a Q4 GGUF; "
                "`hearth models pull botpsy-0.8b` downloads one)",
            )
        async with self._loading:
            if self._runtime is None:
                from hearth.protocol.model.runtime import LlamaRuntime

                path = self.path
                self._runtime = await anyio.to_thread.run_sync(
                    lambda: LlamaRuntime(path, n_ctx=self.n_ctx), abandon_on_cancel=True
                )  # a stop while loading does not wait for the load
        return self._runtime

    async def inert(self) -> Inert:
        """What breaks chat-template markers for this model: the common templates' and
        its own special tokens (loads the model)."""
        runtime = await self.runtime()
        if self._inert is None:
            self._inert = Inert(runtime.special_texts)
        return self._inert

    async def plan(
        self,
        text: str | None,
        tools: list[ToolSpec],
        phone_id: str,
        limits: Limits = LOCAL_LIMITS,
        mode: Mode = "auto",
        cancelled: Callable[[], bool] = lambda: False,
        thinking: bool = False,
        history: Sequence[ChatMessage] = (),
        on_text: OnText | None = None,
        settings: AnswerSettings | None = None,
        now: str | None = None,
    ) -> LocalResult:
        """One local round: a validated local plan (up to `limits.max_steps` calls), or
        an answer. `history` (earlier turns) comes before the request `text` (none: the
        history ends with what to answer, a tool result say), rendered with the model's
        template. `on_text(piece, thinking)` hears the thinking and, when no tool
        may be called, the answer as they are generated (on the event loop, in batches
        while the loop is behind: `relay.TextRelay`).
        A call that is cut or breaks its schema raises `plan_rejected` (the router may
        escalate). `settings` (an app's) tune sampling, bound the answer's tokens within
        `limits` and, in a round that may call no tool, may ask for a JSON answer.
        `now` is the phone's time as the prompt states it."""
        from hearth.protocol.model.runtime import SessionMemory

        runtime = await self.runtime()
        template = runtime.template
        tool_dicts = [t.model_dump() for t in tools]
        schemas: dict[str, dict[str, Any]] = {
            t.function.name: dict(t.function.parameters) for t in tools
        }
        check_schemas(schemas)
        calls = tool_grammar(
            schemas,
            mode,
            limits.max_steps,
            max_value_chars=limits.max_value_chars,
            call_format=template.call_format,
        )
        grammar = calls or answer_grammar(settings)
        messages = [m.model_dump(exclude_none=True) for m in history]
        if text is not None:
            messages.append({"role": "user", "content": text})
        prompt = template.render(messages, tool_dicts, thinking=thinking, now=now)
        # the system and tools part is evaluated once per process, as on the node
        prefix, rest = split_shared(prompt, now)
        hear = on_text or ignore

        def work(relay: TextRelay, stopped: Callable[[], bool]) -> Generation:
            return runtime.generate(
                SessionMemory(),  # one round: dropped after it, never saved
                rest,
                prefix=prefix,
                grammar=grammar,
                max_tokens=answer_tokens(limits.max_tokens, settings),
                sampling=requested(self.sampling or runtime.recommended, settings),
                confidence=True,
                cancelled=lambda: stopped() or cancelled(),
                thinking_budget=limits.max_thinking_tokens if thinking else None,
                on_text=relay.put if calls is None else lambda _: None,
                on_thinking=relay.put_thought,
            )

        async def answer(piece: str) -> None:
            await hear(piece, False)

        async def thought(piece: str) -> None:
            await hear(piece, True)

        result = await generate_streamed(work, answer, thought)
        if result.finish == "cancelled":  # the ask was stopped: it ends cancelled, not answered
            raise HearthError(ErrorCode.CANCELLED, "cancelled by the user")
        parsed = parse_generation(
            result.text,
            result.finish,
            schemas,
            calls=calls is not None,
            call_format=template.call_format,
        )
        await validate_calls(parsed.calls, schemas)
        plan = (
            local_plan(phone_id, [(c.name, c.arguments) for c in parsed.calls])
            if parsed.calls
            else None
        )
        return LocalResult(
            parsed.text,
            plan,
            result.tokens,
            result.confidence,
            result.thinking,
            Usage(prompt_tokens=result.prompt_counted, completion_tokens=result.completion_counted),
            parsed.truncated,
            result.prompt_tokens,
        )


async def ignore(_piece: str, _thinking: bool) -> None:
    """An `OnText` for a round whose text nobody hears."""
