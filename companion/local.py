"""The phone's own model: a Q4 GGUF through the shared model layer, loaded lazily,
kept warm (one load per process), memory-mapped. Same template, grammar, parsing
and validation as the home node; its plans run through the same executor."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from hearth.protocol.model.chat import ChatTemplate
from hearth.protocol.model.grammar import Mode, tool_grammar
from hearth.protocol.model.limits import Sampling
from hearth.protocol.model.toolcalls import parse_generation
from hearth.protocol.model.validate import check_schemas, validate_calls
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Limits, Plan, PlanStep, ToolSpec

if TYPE_CHECKING:  # llama.cpp and numpy load on first local use, not at every start
    from hearth.protocol.model.runtime import LlamaRuntime


LOCAL_LIMITS = Limits(max_steps=8, max_tokens=384)


@dataclass
class LocalResult:
    answer: str
    plan: Plan | None
    tokens: int
    confidence: float | None = None
    thinking: str = ""  # the thinking block, when the request asked for one


class LocalModel:
    """The phone's model, loaded on first use."""

    def __init__(
        self, path: Path | None, n_ctx: int = 8192, sampling: Sampling | None = None
    ) -> None:
        self.path = path
        self.n_ctx = n_ctx
        self.sampling = sampling  # None: the model's own recommended settings
        self._runtime: LlamaRuntime | None = None

    async def runtime(self) -> LlamaRuntime:
        if self.path is None or not self.path.is_file():
            missing = "no local model" if self.path is None else f"no model file at {self.path}"
            raise HearthError(
                ErrorCode.MODEL_NOT_LOADED,
                f"{missing}: set one with `hearth config set model PATH` (a Q4 GGUF; "
                "`hearth models pull botpsy-0.8b` downloads one)",
            )
        if self._runtime is None:
            from hearth.protocol.model.runtime import LlamaRuntime

            self._runtime = await anyio.to_thread.run_sync(
                lambda: LlamaRuntime(self.path, n_ctx=self.n_ctx)
            )  # type: ignore[arg-type]
        return self._runtime

    async def plan(
        self,
        text: str,
        tools: list[ToolSpec],
        phone_id: str,
        limits: Limits = LOCAL_LIMITS,
        mode: Mode = "auto",
        cancelled: Callable[[], bool] = lambda: False,
        thinking: bool = False,
    ) -> LocalResult:
        """One local round: a validated local plan (up to `limits.max_steps` calls), or
        an answer. A call that is cut or breaks its schema raises `plan_rejected` (the
        router may escalate)."""
        from hearth.protocol.model.runtime import SessionMemory

        runtime = await self.runtime()
        template = ChatTemplate(runtime.chat_template)
        tool_dicts = [t.model_dump() for t in tools]
        schemas: dict[str, dict[str, Any]] = {
            t.function.name: dict(t.function.parameters) for t in tools
        }
        check_schemas(schemas)
        grammar = tool_grammar(
            schemas, mode, limits.max_steps, max_value_chars=limits.max_value_chars
        )
        prompt = template.render([{"role": "user", "content": text}], tool_dicts, thinking=thinking)
        result = await anyio.to_thread.run_sync(
            lambda: runtime.generate(
                SessionMemory(),
                prompt,
                grammar=grammar,
                max_tokens=limits.max_tokens,
                sampling=self.sampling or runtime.recommended,
                confidence=True,
                cancelled=cancelled,
                thinking_budget=limits.max_thinking_tokens if thinking else None,
            )
        )
        parsed = parse_generation(result.text, result.finish, schemas, calls=grammar is not None)
        await validate_calls(parsed.calls, schemas)
        if not parsed.calls:
            return LocalResult(parsed.text, None, result.tokens, result.confidence, result.thinking)
        now = time.time()
        plan = Plan(
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
                PlanStep(id=f"s{i}", tool=c.name, arguments=c.arguments)
                for i, c in enumerate(parsed.calls, 1)
            ],
        )
        return LocalResult(parsed.text, plan, result.tokens, result.confidence, result.thinking)
