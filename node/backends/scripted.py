"""A backend that plays scripted answers: a real `Backend` for tests (as httpx's
`MockTransport` is a real transport), so the planner is tested without a model file.

Each round takes the next answer of the script (or asks a function, given the round),
streams it a word at a time, and honours the interface as the other backends do:
`max_tokens` (a word is a token: the answer is cut, finish `length`), `cancel`
(checked before each word, finish `cancelled`) and thinking (an answer's thinking
streams first, when the conversation asks for it). A scripted `HearthError` is
raised as a backend's own failure would be.

`hearth-node serve --script FILE` (config `script`) serves a `ScriptFile`: a JSON
file of plans, each the exact rounds one plan session plays, chosen by the session's
request text (`load_script`, `PlanScript`), so an end-to-end test gets one exact plan
from a real node process.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import anyio
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from hearth.protocol.model.callformats import QWEN_XML, CallFormat
from hearth.protocol.model.grammar import AnswerGrammar, ToolGrammar
from hearth.protocol.model.runtime import Finish, Generation
from hearth.protocol.model.validate import fits
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, ModelInfo, ToolSpec

from . import Conversation, GenerationSettings, OnText, ignore_text

WORD = re.compile(r"\s*\S+|\s+")  # a word with the space before it, or trailing space
MAX_SCRIPT_BYTES = 4 * 1024 * 1024  # a script file larger than this is refused


@dataclass(frozen=True)
class Answer:
    """One scripted round: the text the model writes (tool calls in its own
    `<tool_call>` form), a thinking block before it, or an error instead."""

    text: str = ""
    thinking: str = ""
    error: HearthError | None = None


@dataclass(frozen=True)
class Round:
    """What the backend was given for one round, as the round began: `session` numbers
    the conversations (plan sessions) the backend met, from 1, and `number` this
    round within its session, from 1."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    grammar: ToolGrammar | None
    settings: GenerationSettings
    thinking: bool
    session: int = 1
    number: int = 1

    @property
    def request(self) -> str:
        """The text of the session's request: its last user message ("" if none)."""
        return next((m.content for m in reversed(self.messages) if m.role == "user"), "")


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
    # id of a conversation met → (the conversation, its session number, rounds played)
    _sessions: dict[int, tuple[weakref.ref[Conversation], int, int]] = field(
        default_factory=dict, repr=False
    )
    _met: int = field(default=0, repr=False)  # conversations met so far

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

    def _session_round(self, conv: Conversation) -> tuple[int, int]:
        """The session number of `conv` (a new one the first time it is met) and the
        number of the round it now begins."""
        self._sessions = {k: v for k, v in self._sessions.items() if v[0]() is not None}
        known = self._sessions.get(id(conv))
        if known is None or known[0]() is not conv:
            self._met += 1
            known = (weakref.ref(conv), self._met, 0)
        ref, session, played = known
        self._sessions[id(conv)] = (ref, session, played + 1)
        return session, played + 1

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
        session, number = self._session_round(conv)
        given = Round(
            tuple(conv.messages),
            tuple(conv.tools),
            grammar,
            settings,
            conv.thinking,
            session=session,
            number=number,
        )
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


# -- script files (`hearth-node serve --script FILE`) -------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedError(_Strict):
    """A round that fails as a backend's own failure would: the phone is told `code`."""

    code: ErrorCode
    message: Annotated[str, Field(min_length=1, max_length=2000)]
    retry_after: Annotated[float, Field(ge=0, le=3600)] | None = None


class ScriptedRound(_Strict):
    """One round: `text` is exactly what the model writes (its tool calls in Qwen3.5's
    XML form, `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n
    </function>\n</tool_call>`), after `thinking` when the request asks for thinking;
    or `error` instead; or `json_answer`, a JSON value written as compact JSON, played
    only as a model under the round's grammar could write it: in a round asked for a
    JSON answer (an app's `response_format`) whose schema it fits."""

    text: str = ""
    thinking: str = ""
    error: ScriptedError | None = None
    json_answer: JsonValue = None

    @model_validator(mode="after")
    def _either(self) -> ScriptedRound:
        if self.error is not None and (self.text or self.thinking):
            raise ValueError("a round holds an error or text (and thinking), not both")
        if "json_answer" in self.model_fields_set and (self.text or self.error is not None):
            raise ValueError("a round holds a json_answer or text or an error, not two")
        return self

    def answer(self, given: Round) -> Answer:
        """What the round plays, given what the backend was given for it."""
        if "json_answer" in self.model_fields_set:
            return Answer(text=_json_answer(self.json_answer, given), thinking=self.thinking)
        error = self.error
        failure = (
            None
            if error is None
            else HearthError(error.code, error.message, retry_after=error.retry_after)
        )
        return Answer(text=self.text, thinking=self.thinking, error=failure)


def _json_answer(value: JsonValue, given: Round) -> str:
    """`value` as compact JSON, if the round's grammar asks for a JSON answer it fits."""
    grammar = given.grammar
    where = f"round {given.number} of {given.request!r}"
    if not isinstance(grammar, AnswerGrammar):
        raise HearthError(ErrorCode.INTERNAL, f"{where} asks for no JSON answer: none is played")
    if not fits(grammar.schema, grammar.schema, value):
        raise HearthError(ErrorCode.INTERNAL, f"the JSON answer for {where} breaks its schema")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ScriptedPlan(_Strict):
    """The rounds one plan session plays, in order (a string is a round's text), for a
    session whose request (its last user message) is exactly `request` (any request's
    when it is not given): once, or every such session with `repeat`."""

    request: str | None = None
    repeat: bool = False
    rounds: Annotated[list[ScriptedRound], Field(min_length=1, max_length=64)]

    @field_validator("rounds", mode="before")
    @classmethod
    def _texts(cls, rounds: object) -> object:
        if isinstance(rounds, list):
            return [{"text": r} if isinstance(r, str) else r for r in rounds]
        return rounds


class ScriptFile(_Strict):
    """A script for `hearth-node serve --script`: `{"plans": [<ScriptedPlan>, …]}`. Each
    new plan session takes the first plan not used up for its exact request, else the
    first one not used up for any request."""

    plans: Annotated[list[ScriptedPlan], Field(min_length=1, max_length=1024)]


@dataclass
class PlanScript:
    """A `ScriptFile` as a `ScriptedBackend`'s script: each session plays the rounds of
    the plan it took; a session no plan serves, or one that asks for more rounds than
    its plan holds, is `internal` naming the request (the script is the bug)."""

    file: ScriptFile
    used: set[int] = field(default_factory=set)  # plans (by index) no longer served
    taken: dict[int, int | None] = field(default_factory=dict)  # session → its plan's index

    def __call__(self, given: Round) -> Answer:
        if given.number == 1:
            self.taken[given.session] = self._take(given.request)
        index = self.taken.get(given.session)
        if index is None:  # a session already refused
            raise self._none_for(given.request)
        rounds = self.file.plans[index].rounds
        if given.number > len(rounds):
            raise HearthError(
                ErrorCode.INTERNAL,
                f"the script's plan {index + 1} holds {len(rounds)} round(s); "
                f"round {given.number} of {given.request!r} asked for one more",
            )
        return rounds[given.number - 1].answer(given)

    def _take(self, request: str) -> int | None:
        """The plan the session asking `request` plays: the first one for this request,
        else the first one for any request, among those not used up."""
        for wanted in (request, None):
            for index, plan in enumerate(self.file.plans):
                if index not in self.used and plan.request == wanted:
                    if not plan.repeat:
                        self.used.add(index)
                    return index
        return None

    def _none_for(self, request: str) -> HearthError:
        return HearthError(ErrorCode.INTERNAL, f"the script holds no plan for {request!r}")


def load_script(path: Path) -> PlanScript:
    """The script file at `path`, validated; `invalid_input` naming what is wrong."""
    try:
        with path.open("rb") as f:  # read bounded: a device or a pipe has no size
            text = f.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"no script file at {path}: {exc.strerror}"
        ) from exc
    if len(text) > MAX_SCRIPT_BYTES:
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path}: larger than {MAX_SCRIPT_BYTES} bytes")
    try:
        return PlanScript(ScriptFile.model_validate_json(text))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"{path}: {where + ': ' if where else ''}{err['msg']}"
        ) from exc


def script_backend(path: Path, n_ctx: int = 8192) -> ScriptedBackend:
    """A backend playing the script file at `path` (what `--script` serves)."""
    script = load_script(path)
    info = ModelInfo(name=f"script {path.name}", n_ctx=n_ctx, backend="scripted")
    return ScriptedBackend(script, info=info)
