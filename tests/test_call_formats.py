"""The call format a model's own template teaches is the one the grammar forces and the
parser reads (Qwen3.5 XML, Hermes JSON, Llama 3.x JSON); a template that teaches none
is refused when the model loads, naming the model and the `--upstream` alternative."""

from __future__ import annotations

import json

import pytest

from hearth.protocol.model.callformats import (
    HERMES_JSON,
    LLAMA3_JSON,
    QWEN_XML,
    CallFormat,
    UnsupportedModel,
    default_template,
)
from hearth.protocol.model.chat import ChatTemplate
from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.runtime import LlamaRuntime
from hearth.protocol.model.sampling import first_rejected
from hearth.protocol.model.tiny import chat_template
from hearth.protocol.model.toolcalls import ModelOutputError, ToolCall, parse
from hearth.protocol.wire.errors import ErrorCode

# the markers of the families' own templates, around a loop that shows the tools
HERMES_LIKE = (
    "{% for t in tools %}{{ t | tojson }}{% endfor %}<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"
)
LLAMA3_LIKE = (
    "{{ bos_token }}{% for t in tools %}{{ t | tojson }}{% endfor %}"
    'Respond in the format {"name": function name, "parameters": dictionary}.<|eot_id|>'
    "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>"
    "{{ m.content }}<|eot_id|>{% endfor %}"
)
NO_TOOLS = "{% for m in messages %}<start_of_turn>{{ m.content }}<end_of_turn>{% endfor %}"
UNKNOWN_FORMAT = (
    "{% for t in tools %}{{ t | tojson }}{% endfor %}call functions as [func(a=1)]"
    "{% for m in messages %}{{ m.content }}{% endfor %}"
)

SCHEMAS = {
    "notes_create": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}},
        "required": ["text"],
    },
    "reminder_create": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "at": {"type": "string"}},
        "required": ["text", "at"],
    },
}
CALLS = [
    ToolCall("notes_create", {"text": 'we need "milk"\nand <bread> — café', "pinned": True}),
    ToolCall("reminder_create", {"text": "stretch", "at": "2026-12-08T09:00:00+01:00"}),
]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (chat_template(), QWEN_XML),
        ("", HERMES_JSON),  # no template: the documented default
        (HERMES_LIKE, HERMES_JSON),
        (LLAMA3_LIKE, LLAMA3_JSON),
    ],
)
def test_the_template_decides_the_call_format(source: str, expected: CallFormat) -> None:
    assert ChatTemplate.for_model(source, "m").call_format == expected


@pytest.mark.parametrize(
    "source",
    [NO_TOOLS, UNKNOWN_FORMAT, "{{ raise_exception('no') }}", "{% if %}<tool_call>", "{% for"],
)
def test_a_template_hearth_cannot_plan_with_is_refused_naming_the_model(source: str) -> None:
    with pytest.raises(UnsupportedModel) as refused:
        ChatTemplate.for_model(source, "Some-Model-7B")
    assert refused.value.code == ErrorCode.MODEL_NOT_LOADED
    assert "Some-Model-7B" in refused.value.message and "--upstream" in refused.value.message


def test_the_default_template_renders_tools_and_hermes_calls_in_chatml() -> None:
    template = ChatTemplate(default_template(), bos_token="<bos>", call_format=HERMES_JSON)
    history = [
        {"role": "user", "content": "note milk"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "notes_create", "arguments": {"text": "milk"}}}],
        },
        {"role": "tool", "content": '{"id": 1}'},
    ]
    tools = [{"type": "function", "function": {"name": "notes_create", "parameters": {}}}]
    text = template.render(history, tools)
    assert text.startswith("<bos><|im_start|>system\n")
    assert (
        '<tool_call>\n{"name": "notes_create", "arguments": {"text": "milk"}}\n</tool_call>' in text
    )
    assert text.endswith(
        '<tool_response>\n{"id": 1}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
    )


def written(call_format: CallFormat, calls: list[ToolCall]) -> str:
    """`calls` as a model of that format writes them (properties in schema order)."""
    texts = []
    for call in calls:
        order = list(SCHEMAS[call.name]["properties"])
        arguments = {k: call.arguments[k] for k in order if k in call.arguments}
        body = json.dumps(
            {"name": call.name, call_format.arguments_key: arguments}, ensure_ascii=False
        )
        texts.append(f"<tool_call>\n{body}\n</tool_call>" if call_format.close else body)
    return "\n".join(texts)


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=512)


@pytest.mark.parametrize(("call_format", "calls"), [(HERMES_JSON, CALLS), (LLAMA3_JSON, CALLS[:1])])
def test_json_calls_pass_llama_cpps_grammar_and_parse_back_exactly(
    runtime: LlamaRuntime, call_format: CallFormat, calls: list[ToolCall]
) -> None:
    grammar = tool_grammar(SCHEMAS, "auto", max_calls=4, call_format=call_format)
    assert grammar is not None and grammar.lazy and grammar.trigger == call_format.open
    text = written(call_format, calls)
    tokens = runtime.tokenize(text)
    assert first_rejected(runtime._lib, runtime.llm, grammar, tokens) is None, text
    prose = "Sure. " if call_format.close else ""  # a bare JSON call opens the output
    parsed = parse(prose + text, SCHEMAS, call_format=call_format)
    assert parsed.calls == calls and parsed.text == prose.strip()


def test_the_grammar_refuses_what_the_format_does_not_allow(runtime: LlamaRuntime) -> None:
    llama3 = tool_grammar(SCHEMAS, "required", max_calls=4, call_format=LLAMA3_JSON)
    two = runtime.tokenize(written(LLAMA3_JSON, CALLS[:1]) + "\n" + written(LLAMA3_JSON, CALLS[:1]))
    assert first_rejected(runtime._lib, runtime.llm, llama3, two) is not None  # one per turn
    hermes = tool_grammar(SCHEMAS, "required", call_format=HERMES_JSON)
    unknown = runtime.tokenize('<tool_call>\n{"name": "shell", "arguments": {}}\n</tool_call>')
    assert first_rejected(runtime._lib, runtime.llm, hermes, unknown) is not None
    xml = runtime.tokenize("<tool_call>\n<function=notes_create>\n")
    assert first_rejected(runtime._lib, runtime.llm, hermes, xml) is not None


def test_a_cut_bare_json_call_is_an_error_never_half_a_call() -> None:
    with pytest.raises(ModelOutputError, match="cut off"):
        parse(
            '{"name": "notes_create", "parameters": {"text": "mi', SCHEMAS, call_format=LLAMA3_JSON
        )


def test_a_session_goes_on_by_continuation_only_where_turns_are_chatml() -> None:
    """A later round appends what the new messages add; a template whose turns end its
    own way (Llama 3's `<|eot_id|>`) is rendered anew rather than cut wrongly."""
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    new = [{"role": "user", "content": "more"}]
    chatml = ChatTemplate.for_model(chat_template(), "m").continuation(history, new)
    assert chatml is not None and chatml.startswith("<|im_end|>\n<|im_start|>user\nmore")
    assert ChatTemplate.for_model(LLAMA3_LIKE, "m").continuation(history, new) is None


def test_a_json_value_holding_the_closing_tag_is_read_as_the_grammar_wrote_it(
    runtime: LlamaRuntime,
) -> None:
    call = ToolCall("notes_create", {"text": "a </tool_call> b <tool_call> c"})
    text = written(HERMES_JSON, [call])
    grammar = tool_grammar(SCHEMAS, "required", call_format=HERMES_JSON)
    assert first_rejected(runtime._lib, runtime.llm, grammar, runtime.tokenize(text)) is None
    assert parse(text, SCHEMAS, call_format=HERMES_JSON).calls == [call]


def test_json_with_a_name_inside_prose_stays_prose_for_the_bare_format(
    runtime: LlamaRuntime,
) -> None:
    """Llama 3.x calls open the output: an answer showing `{"name": …}` later is text,
    neither forced into a call by the grammar nor read as one."""
    grammar = tool_grammar(SCHEMAS, "auto", call_format=LLAMA3_JSON)
    assert grammar is not None and grammar.anchored
    answer = 'An example person: {"name": "Alice", "age": 30}'
    assert first_rejected(runtime._lib, runtime.llm, grammar, runtime.tokenize(answer)) is None
    shown = 'Like this: {"name": "notes_create", "parameters": {"text": "x"}}'
    assert parse(shown, SCHEMAS, call_format=LLAMA3_JSON).calls == []
    opening = runtime.tokenize('{"name": "Alice"}')
    assert first_rejected(runtime._lib, runtime.llm, grammar, opening) is not None
