"""One conformance suite for every model backend: llama.cpp in process (the tiny GGUF),
an OpenAI-compatible upstream (llama.cpp's own server on the tiny GGUF) and the
scripted backend. Each must stream what it answers, keep to `max_tokens`, stop on
`cancel`, answer a forced round with a valid call and continue a conversation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
import pytest

from hearth.node.backends import Backend, Conversation, GenerationSettings
from hearth.node.backends.llamacpp import LlamaCppBackend
from hearth.node.backends.scripted import Round, ScriptedBackend
from hearth.node.backends.upstream import OpenAIUpstream
from hearth.protocol.model.grammar import ToolGrammar, tool_grammar
from hearth.protocol.model.runtime import Generation
from hearth.protocol.model.toolcalls import parse_generation
from hearth.protocol.model.validate import validate_call
from hearth.protocol.wire.messages import ChatMessage, FunctionSpec, ToolSpec

from .conftest import Processes
from .upstream_servers import ROOT, command, free_port, wait_serving

pytestmark = pytest.mark.timeout(300)
T = TypeVar("T")

SCHEMAS = {
    "notes_create": {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 40}},
        "required": ["text"],
    }
}
TOOLS = [ToolSpec(function=FunctionSpec(name=n, parameters=s)) for n, s in SCHEMAS.items()]
ENDLESS = ToolGrammar("root ::= [a-w ] root")  # never complete: generation runs to max_tokens
SCRIPTED_CALL = (
    "<tool_call>\n<function=notes_create>\n<parameter=text>\nmilk\n</parameter>\n"
    "</function>\n</tool_call>"
)


def scripted_model(given: Round) -> str:
    """What the scripted backend answers: a call where the round forces one, else prose."""
    if given.tools and given.grammar is not None and not given.grammar.lazy:
        return SCRIPTED_CALL
    return "a few words of prose, more of them than any round here allows " * 4


@pytest.fixture(scope="module")
def llama_server(tiny_models) -> Iterator[str]:
    procs = Processes()
    try:
        port = free_port()
        proc = procs.spawn(*command("llama-server", tiny_models[0], port), cwd=ROOT)
        yield wait_serving(proc, port)
    finally:
        procs.cleanup()


@pytest.fixture(scope="module")
def in_process(tiny_models) -> LlamaCppBackend:
    return LlamaCppBackend(tiny_models[1], n_ctx=2048)


@pytest.fixture(params=["llama-cpp", "upstream", "scripted"])
def make_backend(request) -> Callable[[], Backend]:
    """A fresh backend of each kind (the model and the server are shared by the module)."""
    if request.param == "llama-cpp":
        backend = request.getfixturevalue("in_process")
        return lambda: backend
    if request.param == "upstream":
        url = request.getfixturevalue("llama_server")
        return lambda: OpenAIUpstream(url)
    return lambda: ScriptedBackend(scripted_model)


async def one_round(
    backend: Backend,
    conv: Conversation,
    grammar: ToolGrammar | None = None,
    max_tokens: int = 16,
    cancelled: bool = False,
) -> tuple[Generation, list[str]]:
    """One round: its result and the pieces it streamed."""
    streamed: list[str] = []

    async def on_text(piece: str) -> None:
        streamed.append(piece)

    cancel = anyio.Event()
    if cancelled:
        cancel.set()
    settings = GenerationSettings(max_tokens)
    result = await backend.generate(
        conv, grammar=grammar, settings=settings, on_text=on_text, cancel=cancel
    )
    return result, streamed


def run(make: Callable[[], Backend], rounds: Callable[[Backend], Awaitable[T]]) -> T:
    """`rounds` on a fresh backend, closed after."""

    async def main() -> T:
        backend = make()
        try:
            return await rounds(backend)
        finally:
            await backend.aclose()

    return anyio.run(main, backend="trio")


def generate(
    make: Callable[[], Backend],
    conv: Conversation,
    grammar: ToolGrammar | None = None,
    max_tokens: int = 16,
    cancelled: bool = False,
) -> tuple[Generation, list[str]]:
    return run(make, lambda backend: one_round(backend, conv, grammar, max_tokens, cancelled))


def conversation(tools: list[ToolSpec] | None = None) -> Conversation:
    return Conversation(messages=[ChatMessage(role="user", content="note milk")], tools=tools or [])


def test_the_answer_streams_as_it_is_produced(make_backend) -> None:
    conv = conversation()
    result, streamed = generate(make_backend, conv)
    assert "".join(streamed) == result.text
    assert result.finish in ("stop", "length") and result.tokens <= 16
    assert conv.consumed == len(conv.messages) + 1  # with the answer the planner appends


def test_max_tokens_cuts_the_answer(make_backend) -> None:
    result, _ = generate(make_backend, conversation(), ENDLESS, max_tokens=3)
    assert result.finish == "length" and 0 < result.tokens <= 3


def test_a_cancelled_round_stops_within_a_token(make_backend) -> None:
    result, streamed = generate(make_backend, conversation(), ENDLESS, 200, cancelled=True)
    assert result.finish == "cancelled" and result.tokens <= 1 and len(streamed) <= 1


def test_a_forced_round_answers_with_a_valid_call(make_backend) -> None:
    grammar = tool_grammar(SCHEMAS, "required", max_calls=1)
    result, _ = generate(make_backend, conversation(TOOLS), grammar, max_tokens=96)
    (call,) = parse_generation(result.text, result.finish, SCHEMAS).calls
    assert call.name == "notes_create"
    validate_call(call, SCHEMAS)


def test_a_later_round_continues_the_conversation(make_backend) -> None:
    conv = conversation(TOOLS)

    async def two_rounds(backend: Backend) -> tuple[Generation, list[str]]:
        first, _ = await one_round(backend, conv, tool_grammar(SCHEMAS, "required"), 96)
        conv.messages += [
            ChatMessage(role="assistant", content=first.text),
            ChatMessage(role="tool", tool_call_id="s1", content='{"done": true}'),
        ]
        return await one_round(backend, conv, None, 8)

    second, streamed = run(make_backend, two_rounds)
    assert "".join(streamed) == second.text
    assert second.finish in ("stop", "length")
    assert conv.consumed == 4
