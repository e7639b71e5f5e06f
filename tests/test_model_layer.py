"""Template rendering, tool-call parsing, grammars and the runtime, on the real tiny model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hearth.protocol.model.chat import ChatTemplate
from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.runtime import LlamaRuntime, SessionMemory
from hearth.protocol.model.toolcalls import ModelOutputError, ToolCall, parse
from hearth.protocol.model.validate import validate_call

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "notes_create",
            "description": "Make a note",
            "parameters": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": 40},
                    "pinned": {"type": "boolean"},
                },
                "required": ["text"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "alarm_set",
            "description": "Set an alarm",
            "parameters": {
                "type": "object",
                "properties": {
                    "minutes": {"type": "integer", "minimum": 1, "maximum": 1440},
                    "label": {"type": "string", "enum": ["wake", "tea"]},
                },
                "required": ["minutes"],
            },
        },
    },
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[0], n_ctx=4096)


def test_parses_xml_and_hermes_json_calls() -> None:
    out = (
        "Sure.\n<tool_call>\n<function=alarm_set>\n<parameter=minutes>\n30\n</parameter>\n"
        "</function>\n</tool_call>\n"
        '<tool_call>{"name": "notes_create", "arguments": {"text": "milk"}}</tool_call>'
    )
    parsed = parse(out, SCHEMAS)
    assert parsed.calls == [
        ToolCall("alarm_set", {"minutes": 30}),
        ToolCall("notes_create", {"text": "milk"}),
    ]
    assert parsed.text == "Sure."


def test_a_call_cut_by_the_token_limit_is_an_error() -> None:
    with pytest.raises(ModelOutputError, match="cut off"):
        parse("<tool_call>\n<function=notes_create>\n<parameter=text>\nmil", SCHEMAS)


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (ToolCall("nope", {}), "unknown tool"),
        (ToolCall("alarm_set", {"minutes": 99999}), "maximum"),
        (ToolCall("alarm_set", {"minutes": "soon"}), "integer"),
        (ToolCall("alarm_set", {"minutes": 2**60}), r"2\^53"),
        (ToolCall("notes_create", {"text": "a\x07b"}), "control character"),
        (ToolCall("notes_create", {}), "required"),
        (ToolCall("alarm_set", {"minutes": 5, "label": "coffee"}), "is not one of"),
    ],
)
def test_invalid_calls_are_rejected_with_a_reason(call: ToolCall, problem: str) -> None:
    with pytest.raises(ModelOutputError, match=problem):
        validate_call(call, SCHEMAS)


@given(st.text(max_size=60))
def test_parse_never_raises_anything_but_a_typed_error(text: str) -> None:
    try:
        parse(text, SCHEMAS)
    except ModelOutputError as exc:
        assert exc.code.value == "plan_rejected"


def test_renders_the_models_own_template_with_tools(runtime: LlamaRuntime) -> None:
    template = ChatTemplate(runtime.chat_template)
    prompt = template.render([{"role": "user", "content": "wake me"}], TOOLS)
    assert '"name": "alarm_set"' in prompt
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    thinking = template.render([{"role": "user", "content": "wake me"}], TOOLS, thinking=True)
    assert thinking.endswith("<|im_start|>assistant\n<think>\n")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["required", "auto"])
def test_grammar_constrained_output_always_parses(runtime, seed: int, mode: str) -> None:
    template = ChatTemplate(runtime.chat_template)
    memory = SessionMemory()
    from hearth.protocol.model.runtime import Sampling

    result = runtime.generate(
        memory,
        template.render([{"role": "user", "content": "set an alarm"}], TOOLS),
        grammar=tool_grammar(SCHEMAS, mode, max_calls=2),
        max_tokens=400,
        sampling=Sampling(temperature=0.9, seed=seed),
    )
    assert result.finish == "stop"
    parsed = parse(result.text, SCHEMAS)
    if mode == "required":
        assert parsed.calls
    for call in parsed.calls:
        assert call.name in SCHEMAS
        try:  # random weights may still break rules the grammar cannot encode:
            validate_call(call, SCHEMAS)  # those become typed rejections, never a plan
        except ModelOutputError as exc:
            assert exc.code.value == "plan_rejected"


def test_a_session_continues_with_only_the_new_tokens(runtime: LlamaRuntime) -> None:
    template = ChatTemplate(runtime.chat_template)
    memory = SessionMemory()
    history = [{"role": "user", "content": "note milk"}]
    first = runtime.generate(
        memory,
        template.render(history, TOOLS),
        grammar=tool_grammar(SCHEMAS, "required", 1),
        max_tokens=300,
    )
    held = len(memory.tokens)
    history.append({"role": "assistant", "content": first.text})
    suffix = template.continuation(history, [{"role": "tool", "content": "saved"}], TOOLS)
    assert suffix is not None and suffix.startswith("<|im_end|>\n<|im_start|>user")
    other = SessionMemory()  # another session in between must not disturb this one
    runtime.generate(
        other, template.render([{"role": "user", "content": "hi"}]), grammar=None, max_tokens=4
    )
    second = runtime.generate(memory, suffix, grammar=tool_grammar(SCHEMAS, "none"), max_tokens=300)
    assert second.prompt_tokens == len(runtime.tokenize(suffix))
    unevaluated = second.finish != "stop"  # the last token taken, when the limit cut it
    assert len(memory.tokens) == held + second.prompt_tokens + second.tokens - unevaluated
    assert parse(second.text).calls == []


def test_cancel_stops_within_one_token(runtime: LlamaRuntime) -> None:
    seen: list[str] = []
    result = runtime.generate(
        SessionMemory(),
        "<|im_start|>user\nhi<|im_end|>\n",
        grammar=None,
        max_tokens=50,
        on_text=seen.append,
        cancelled=lambda: bool(seen),
    )
    assert result.finish == "cancelled" and result.tokens == 1


def test_max_tokens_is_enforced(runtime: LlamaRuntime) -> None:
    result = runtime.generate(
        SessionMemory(), "<|im_start|>user\nhi<|im_end|>\n", grammar=None, max_tokens=7
    )
    assert result.tokens <= 7


def test_a_shared_prefix_is_evaluated_once_and_gives_the_same_output(runtime) -> None:
    template = ChatTemplate(runtime.chat_template)
    full = template.render([{"role": "user", "content": "note eggs"}], TOOLS)
    prefix, sep, rest = full.partition("<|im_start|>user")
    other_full = template.render([{"role": "user", "content": "note some bread"}], TOOLS)
    other = other_full.partition("<|im_start|>user")[2]
    grammar = tool_grammar(SCHEMAS, "required", 1)
    cold = runtime.generate(
        SessionMemory(),
        sep + rest,
        grammar=grammar,
        max_tokens=200,
        prefix=prefix + "<!-- uncached -->",
    )
    first = runtime.generate(
        SessionMemory(), sep + rest, grammar=grammar, max_tokens=200, prefix=prefix
    )
    second = runtime.generate(
        SessionMemory(), sep + other, grammar=grammar, max_tokens=200, prefix=prefix
    )
    plain = runtime.generate(SessionMemory(), full, grammar=grammar, max_tokens=200)
    other_plain = runtime.generate(SessionMemory(), other_full, grammar=grammar, max_tokens=200)
    assert second.prompt_tokens == len(runtime.tokenize(sep + other)) < first.prompt_tokens
    assert first.text == plain.text
    assert second.text == other_plain.text
    assert cold.prompt_tokens > second.prompt_tokens
