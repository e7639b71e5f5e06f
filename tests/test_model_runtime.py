"""The token loop on the real tiny model: valid UTF-8 only, checked grammars, thinking
with its own budget, sampling settings from the GGUF."""

from __future__ import annotations

import pytest

from hearth.protocol.model.chat import ChatTemplate
from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.limits import Sampling
from hearth.protocol.model.runtime import LlamaRuntime, SessionMemory
from hearth.protocol.model.toolcalls import ModelOutputError, parse_generation
from hearth.protocol.model.validate import validate_call
from hearth.protocol.wire.errors import ErrorCode, HearthError

SCHEMAS = {
    "notes_create": {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 40}},
        "required": ["text"],
    }
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "notes_create", "parameters": SCHEMAS["notes_create"]},
    }
]


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=2048)


@pytest.mark.parametrize("seed", range(6))
def test_only_valid_utf8_is_emitted(runtime: LlamaRuntime, seed: int) -> None:
    """Random weights pick byte tokens that break UTF-8; none gets through (before:
    decoded with replacement characters)."""
    pieces: list[str] = []
    result = runtime.generate(
        SessionMemory(),
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        grammar=None,
        max_tokens=200,
        sampling=Sampling(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=seed),
        on_text=pieces.append,
    )
    assert "\ufffd" not in result.text
    assert "".join(pieces) == result.text
    result.text.encode("utf-8")  # no lone surrogates either


def test_a_grammar_llama_cpp_cannot_parse_is_invalid_input(runtime: LlamaRuntime) -> None:
    with pytest.raises(HearthError) as caught:
        runtime.generate(SessionMemory(), "hi", grammar='root ::= "a"{2500,120}', max_tokens=4)
    assert caught.value.code == ErrorCode.INVALID_INPUT
    after = runtime.generate(SessionMemory(), "hi", grammar='root ::= "ok"', max_tokens=8)
    assert after.text == "ok" and after.finish == "stop"


@pytest.mark.parametrize("budget", [1, 6, 40])
def test_thinking_has_its_own_budget_and_is_never_parsed(
    runtime: LlamaRuntime, budget: int
) -> None:
    prompt = ChatTemplate(runtime.chat_template).render(
        [{"role": "user", "content": "note milk"}], TOOLS, thinking=True
    )
    assert prompt.endswith("<think>\n")
    thought: list[str] = []
    result = runtime.generate(
        SessionMemory(),
        prompt,
        grammar=tool_grammar(SCHEMAS, "required", 1),
        max_tokens=200,
        thinking_budget=budget,
        on_thinking=thought.append,
    )
    assert "".join(thought) == result.thinking and "</think>" in result.thinking
    assert len(runtime.tokenize(result.thinking.split("</think>")[0])) <= budget + 2
    if result.finish == "stop":
        parsed = parse_generation(result.text, result.finish, SCHEMAS, thinking=True)
        assert [c.name for c in parsed.calls] == ["notes_create"]
        try:
            validate_call(parsed.calls[0], SCHEMAS)
        except ModelOutputError as exc:  # random weights: a typed refusal at worst
            assert exc.code == ErrorCode.PLAN_REJECTED


def test_sampling_defaults_come_from_the_gguf_then_configuration() -> None:
    meta = {"general.sampling.temp": "0.6", "general.sampling.top_k": "20"}
    assert Sampling.from_gguf(meta) == Sampling(temperature=0.6, top_k=20)
    assert Sampling.from_gguf(meta, top_k=5).top_k == 5
    assert Sampling.from_gguf({}) == Sampling()
