"""Issue 16: realistic assistant outputs, each accepted by the tool grammar inside
llama.cpp's own grammar sampler token by token (the tiny model's real tokenizer),
parsed back exactly and validated."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hearth.protocol.model.grammar import ToolGrammar, tool_grammar
from hearth.protocol.model.runtime import LlamaRuntime
from hearth.protocol.model.sampling import first_rejected
from hearth.protocol.model.toolcalls import ToolCall, parse, parse_generation, render_calls
from hearth.protocol.model.validate import check_schemas, validate_call


class _Frozen(dict):  # type: ignore[type-arg]
    """Schemas usable as a cache key (never changed)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)


S = {"type": "string"}
SCHEMAS = {
    "send_message": {
        "type": "object",
        "properties": {
            "to": {"type": "string", "maxLength": 200},
            "body": {"type": "string", "minLength": 1, "maxLength": 2000},
            "urgent": {"type": "boolean"},
        },
        "required": ["to", "body"],
    },
    "notes_create": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 200},
            "text": {"type": "string", "maxLength": 4000},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 20},
            "pinned": {"type": "boolean"},
        },
        "required": ["text"],
    },
    "calendar_create": {
        "type": "object",
        "properties": {
            "title": S,
            "start": {"type": "string", "minLength": 10, "maxLength": 40},
            "duration_min": {"type": "integer", "minimum": 1, "maximum": 1440},
            "attendees": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": S, "email": S, "optional": {"type": "boolean"}},
                    "required": ["email"],
                },
            },
        },
        "required": ["title", "start"],
    },
    "code_run": {
        "type": "object",
        "properties": {
            "language": {"type": "string", "enum": ["python", "bash", "javascript"]},
            "source": S,
        },
        "required": ["language", "source"],
    },
    "transfer": {
        "type": "object",
        "properties": {
            "amount": {"type": "number"},
            "currency": {"type": "string", "enum": ["EUR", "USD", "JPY"]},
            "reference": {"type": "string", "minLength": 0, "maxLength": 140},
            "meta": {
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "integer"}},
                    "ratio": {"type": "number"},
                    "nested": {
                        "type": "object",
                        "properties": {"deep": {"type": ["string", "null"]}},
                    },
                },
            },
        },
        "required": ["amount", "currency"],
    },
    "web_search": {
        "type": "object",
        "properties": {"query": S, "max_results": {"type": "integer", "minimum": 1}},
        "required": ["query"],
    },
}

LETTER = (
    "Dear Ms. Okafor,\n\nThank you for the detailed report. I read it twice & I agree "
    'with the "phase two" plan; the budget (€12,400) looks right.\n\n'
    "Two questions:\n1. Can we move the review to Tuesday?\n2. Who owns the <legacy> import?"
    "\n\nBest regards,\nSam"
)
CODE = (
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n"
    '    return fib(n - 1) + fib(n - 2)\n\nprint(f"{fib(20)=}")\n'
)
HTML = (
    '<div class="card">\n  <h1>Menu</h1>\n  <p>Soup &amp; bread</p>\n</div>\n'
    "<!-- </parameter> is just text here -->"
)
MARKDOWN = (
    "# Trip plan\n\n| Day | City | Notes |\n|---|---|---|\n| 1 | Kyoto | 🏯 temples |\n"
    "| 2 | Osaka | 🍜 ramen |\n\n> Remember: `JR pass` first.\n\n- [ ] book hotel\n- [x] tickets\n"
    "\n```bash\necho 'done' && exit 0\n```"
)
SCRIPTS = [
    "明日の会議は十時からです。資料を準備してください。",
    "Привет! Напомни мне купить хлеб и молоко завтра утром.",
    "مرحبا، هل يمكنك حجز طاولة لشخصين الساعة الثامنة؟",
    "नमस्ते, कल सुबह सात बजे का अलार्म लगा दो।",
    "안녕하세요, 내일 회의 자료를 보내 주세요. 감사합니다!",
    "Γειά σου! Θα φτάσω στις 6 μ.μ. 🚆",  # noqa: RUF001
    "שלום, אני מאחר בעשר דקות.",
    "สวัสดีครับ พรุ่งนี้เจอกันที่สถานี",
    "😀🎉👍🏽 family: 👨‍👩‍👧‍👦 flags: 🇯🇵🇧🇷 math: 𝔸𝕓𝕔 ∑∫√",  # noqa: RUF001
]
LONG_ANSWER = "\n\n".join(
    f"## Part {i}\n\nThis paragraph explains step {i} in detail, with *emphasis*, "
    f"`code`, a [link](https://example.org/{i}) and a list:\n\n- one\n- two\n- three"
    for i in range(1, 13)
)


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(name, arguments)


def corpus() -> list[tuple[str, str, list[ToolCall]]]:
    """(id, prose, calls)."""
    cases: list[tuple[str, str, list[ToolCall]]] = []
    bodies = [LETTER, CODE, HTML, MARKDOWN, *SCRIPTS, "", " leading and trailing spaces "]
    for i, body in enumerate(bodies):
        if body:
            cases.append((f"message-{i}", "", [call("send_message", to="Okafor", body=body)]))
        cases.append(
            (
                f"note-{i}",
                "Sure, I'll save that.",
                [call("notes_create", title=f"Note {i}", text=body, tags=["a", "b c"])],
            )
        )
        cases.append((f"answer-{i}", body or "OK.", []))
    for i, text in enumerate(SCRIPTS):
        cases.append(
            (f"search-{i}", text, [call("web_search", query=text[:30], max_results=i + 1)])
        )
    cases += [
        ("long-answer", LONG_ANSWER, []),
        ("code-run", "", [call("code_run", language="python", source=CODE)]),
        (
            "bash-run",
            "",
            [call("code_run", language="bash", source="ls -la | grep '<x>' && echo \"ok\"\n")],
        ),
        (
            "meeting",
            "Booking it now.",
            [
                call(
                    "calendar_create",
                    title="Review — Q3 «draft»",
                    start="2026-12-04T10:00:00+01:00",
                    duration_min=45,
                    attendees=[
                        {"name": "Ana", "email": "ana@example.org"},
                        {"email": "bo@example.org", "optional": True},
                    ],
                )
            ],
        ),
        ("numbers-1", "", [call("transfer", amount=12.5, currency="EUR")]),
        ("numbers-2", "", [call("transfer", amount=-0.001, currency="USD", reference="")]),
        ("numbers-3", "", [call("transfer", amount=1e-7, currency="JPY")]),
        ("numbers-4", "", [call("transfer", amount=9007199254740992, currency="JPY")]),
        ("numbers-5", "", [call("transfer", amount=6.02e23, currency="EUR")]),
        (
            "nested",
            "",
            [
                call(
                    "transfer",
                    amount=3,
                    currency="EUR",
                    meta={"ids": [1, -2, 30000], "ratio": 0.25, "nested": {"deep": None}},
                )
            ],
        ),
        (
            "nested-text",
            "",
            [
                call(
                    "transfer",
                    amount=1,
                    currency="EUR",
                    meta={"nested": {"deep": 'quote " and \\ and\nnewline\tand tab'}},
                )
            ],
        ),
        (
            "three-calls",
            "Doing all three.",
            [
                call("web_search", query="weather Berlin tomorrow", max_results=3),
                call("send_message", to="Mum", body="Call you at 6 🙂", urgent=True),
                call("notes_create", text="milk\neggs\nbread", pinned=False),
            ],
        ),
        (
            "parallel-search",
            "",
            [call("web_search", query=q) for q in ("東京 天気", "погода Москва", "طقس القاهرة")],
        ),
    ]
    return cases


CORPUS = corpus()
FROZEN = _Frozen(SCHEMAS)
CODE_ONLY = _Frozen({"code_run": SCHEMAS["code_run"]})
THINKING = [
    "The user wants a note. I could write <tool_call> here but I am only thinking.\n",
    "Let me plan:\n1. search\n2. answer\nNo <function=x> now.\n",
]


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=512)


def test_the_corpus_is_big_and_its_calls_valid() -> None:
    assert len(CORPUS) >= 64
    check_schemas(SCHEMAS)
    for _, _, calls in CORPUS:
        for c in calls:
            validate_call(c, SCHEMAS)


@pytest.mark.parametrize(("case", "prose", "calls"), CORPUS, ids=[c[0] for c in CORPUS])
def test_realistic_output_is_accepted_token_by_token_and_parses_back(
    runtime: LlamaRuntime, case: str, prose: str, calls: list[ToolCall]
) -> None:
    rendered = render_calls(calls, SCHEMAS)
    output = f"{prose}\n{rendered}" if prose and calls else prose or rendered
    grammar = grammar_for(FROZEN, "auto", 8)
    tokens = runtime.tokenize(output)
    refused = first_rejected(runtime._lib, runtime.llm, grammar, tokens)
    assert refused is None, (refused, runtime.llm.detokenize(tokens[: refused or 0])[-80:])
    if calls:  # the same calls, forced from the first token
        required = grammar_for(FROZEN, "required", 8)
        assert (
            first_rejected(runtime._lib, runtime.llm, required, runtime.tokenize(rendered)) is None
        )
    parsed = parse(output, SCHEMAS)
    assert parsed.calls == calls
    assert parsed.text == prose.strip()
    for c in parsed.calls:
        validate_call(c, SCHEMAS)


@pytest.mark.parametrize("thought", THINKING)
def test_a_thinking_block_is_never_parsed_as_a_call(thought: str) -> None:
    answer = "Here is the answer."
    parsed = parse_generation(f"{thought}</think>\n\n{answer}", "stop", SCHEMAS, thinking=True)
    assert parsed.calls == [] and parsed.text == answer
    with_call = render_calls([call("web_search", query="x")])
    parsed = parse_generation(f"{thought}</think>\n\n{with_call}", "stop", SCHEMAS, thinking=True)
    assert parsed.calls == [call("web_search", query="x")]


def test_the_chat_template_renders_past_calls_so_they_parse_back(runtime: LlamaRuntime) -> None:
    from hearth.protocol.model.chat import ChatTemplate

    template = ChatTemplate(runtime.chat_template)
    calls = [c for _, _, cs in CORPUS for c in cs][:12]
    for c in calls:
        prompt = template.render(
            [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": c.name, "arguments": c.arguments}}],
                },
            ],
            add_generation_prompt=False,
        )
        turn = prompt.split("<|im_start|>assistant\n", 1)[1].removesuffix("<|im_end|>\n")
        assert parse(turn, SCHEMAS).calls == [c]
        grammar = tool_grammar(SCHEMAS, "required", max_calls=1)
        assert first_rejected(runtime._lib, runtime.llm, grammar, runtime.tokenize(turn)) is None


_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]) | st.sampled_from("\n\t<>/&"),
    max_size=60,
).filter(lambda t: "<|" not in t)  # a control token's text would tokenize as that token


@functools.cache
def grammar_for(schemas: Any, mode: str, calls: int) -> ToolGrammar:
    grammar = tool_grammar(dict(schemas), mode, max_calls=calls)  # type: ignore[arg-type]
    assert grammar is not None
    return grammar


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_TEXT)
def test_any_writable_text_round_trips_and_unwritable_text_is_refused(
    runtime: LlamaRuntime, body: str
) -> None:
    """What the grammar accepts parses back byte for byte and validates; a value the
    validator would refuse (a control character) or that would end itself early
    (`\\n</parameter>`) is never accepted."""
    schemas = CODE_ONLY
    grammar = grammar_for(schemas, "required", 1)
    writable = [call("code_run", language="bash", source=body)]
    text = render_calls(writable, schemas)
    if "\n</parameter>" in body:
        assert (
            first_rejected(runtime._lib, runtime.llm, grammar, runtime.tokenize(text)) is not None
        )
        return
    assert first_rejected(runtime._lib, runtime.llm, grammar, runtime.tokenize(text)) is None
    assert parse(text, schemas).calls == writable
    validate_call(writable[0], schemas)
    for bad in ("\x00", "\x1b", "\x85", "\r"):
        broken = render_calls([call("code_run", language="bash", source=body + bad)], schemas)
        tokens = runtime.tokenize(broken)
        assert first_rejected(runtime._lib, runtime.llm, grammar, tokens) is not None
