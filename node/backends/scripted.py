"""A backend that plays scripted answers: a real `Backend` for tests (as httpx's
`MockTransport` is a real transport), so the planner is tested without a model file.

Each round takes the next answer of the script (or asks a function, given the round),
streams it a word at a time, and honours the interface as the other backends do:
`max_tokens` (a word is a token: the answer is cut, finish `length`), `cancel`
(checked before each word, finish `cancelled`) and thinking (an answer's thinking
streams first, when the conversation asks for it). A scripted `HearthError` is
raised as a backend's own failure would be.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio

from hearth.protocol.model.callformats import QWEN_XML, CallFormat
from hearth.protocol.model.grammar import ToolGrammar
from hearth.protocol.model.runtime import Finish, Generation
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, ModelInfo, ToolSpec

from . import Conversation, GenerationSettings, OnText, ignore_text

WORD = re.compile(r"\s*\S+|\s+")  # a word with the space before it, or trailing space


@dataclass(frozen=True)
class Answer:
    """One scripted round: the text the model writes (tool calls in its own
    `<tool_call>` form), a thinking block before it, or an error instead."""

    text: str = ""
    thinking: str = ""
    error: HearthError | None = None


@dataclass(frozen=True)
class Round:
    """What the backend was given for one round, as the round began."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    grammar: ToolGrammar | None
    settings: GenerationSettings
    thinking: bool


Script = Sequence[Answer | str] | Callable[[Round], Answer | str]


@dataclass
class ScriptedBackend:
    """Plays `script`: its answers in order (a plain string is an answer's text), or
    what a function answers for each round. A script that runs out is `internal`."""

    script: Script
    info: ModelInfo = field(
        default_factory=lambda: ModelInfo(name="scripted", n_ctx=8192, backend="scripted")
    )
    rounds: list[Round] = field(default_factory=list)  # what each round was given
    call_format: CallFormat = QWEN_XML

    def _answer(self, given: Round) -> Answer:
        if callable(self.script):
            answer = self.script(given)
        elif len(self.rounds) < len(self.script):
            answer = self.script[len(self.rounds)]
        else:
            raise HearthError(
                ErrorCode.INTERNAL, f"the script holds no answer for round {len(self.rounds) + 1}"
            )
        return Answer(text=answer) if isinstance(answer, str) else answer

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
        given = Round(tuple(conv.messages), tuple(conv.tools), grammar, settings, conv.thinking)
        answer = self._answer(given)
        prompt = sum(len(WORD.findall(m.content)) for m in conv.messages[conv.consumed :])
        self.rounds.append(given)
        if answer.error is not None:
            raise answer.error
        thought: list[str] = []
        finish: Finish = "stop"
        if conv.thinking:  # a block past its budget is closed there, as llama.cpp's is
            budget = conv.thinking_budget
            thinking = WORD.findall(answer.thinking)[:budget]
            thought, finish = await _play(thinking, budget, on_thinking, cancel)
        words: list[str] = []
        if finish == "stop":
            pieces = WORD.findall(answer.text)
            words, finish = await _play(pieces, settings.max_tokens, on_text, cancel)
        conv.consumed = len(conv.messages) + 1  # + the assistant turn the planner appends
        return Generation(
            "".join(words),
            len(words),
            finish,
            prompt_tokens=prompt,  # a word a token, of what the context did not hold yet
            thinking="".join(thought),
        )

    async def aclose(self) -> None:
        return None


async def _play(
    pieces: list[str], budget: int, sink: OnText, cancel: anyio.Event
) -> tuple[list[str], Finish]:
    """`pieces` streamed to `sink` one at a time, at most `budget` of them, until `cancel`:
    those played, and why playing ended."""
    played: list[str] = []
    for piece in pieces:
        await anyio.lowlevel.checkpoint()  # as a model's stream yields between tokens
        if cancel.is_set():
            return played, "cancelled"
        if len(played) == budget:
            return played, "length"
        played.append(piece)
        await sink(piece)
    return played, "stop"
