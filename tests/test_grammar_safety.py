"""Issue 14, grammars and validation: no tool schema crashes, freezes or exhausts a
process; each one ends as a grammar llama.cpp parses or a typed refusal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.limits import GrammarLimits
from hearth.protocol.model.toolcalls import ModelOutputError, ToolCall
from hearth.protocol.model.validate import check_schemas, validate_calls
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, Limits, PlanRequest, ToolSpec

from .test_node import TOOLS, node, phone, plan, request  # noqa: F401  (fixtures)

FUZZ = Path(__file__).parent / "fuzz" / "fuzz_schemas.py"
FREEZE = "a" * 30 + "!"  # `^(a+)+$` backtracks 2^30 times on it


def text_tool(value_schema: dict) -> dict:
    return {"type": "object", "properties": {"text": value_schema}, "required": ["text"]}


ISSUE_SCHEMAS = {
    "segfault_min_above_cap": {"type": "string", "minLength": 2500, "maxLength": 10000},
    "form_feed_enum": {"type": "string", "enum": ["\f"]},
    "backspace_enum": {"type": "string", "enum": ["a\bb", "ok"]},
    "memory_min_300_max_1200": {"type": "string", "minLength": 300, "maxLength": 1200},
    "catastrophic_pattern": {"type": "string", "enum": [FREEZE], "pattern": "^(a+)+$"},
}


@pytest.mark.parametrize("name", ISSUE_SCHEMAS)
def test_issue_schemas_compile_or_are_refused_in_a_bounded_child(name: str, tiny_models) -> None:
    """Built, parsed by llama.cpp and sampled from under a 1 GiB address-space limit:
    the child exits cleanly (before: SIGSEGV, or memory growing past any bound)."""
    result = subprocess.run(
        [
            sys.executable,
            str(FUZZ),
            str(tiny_models[1]),
            "--max-mb",
            "1024",
            "--schema",
            json.dumps(text_tool(ISSUE_SCHEMAS[name])),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["compiled"] + outcome["refused"] == 1


def test_every_repetition_count_is_bounded_and_ordered() -> None:
    limits = GrammarLimits()
    for schema in ISSUE_SCHEMAS.values():
        try:
            grammar = tool_grammar({"t": text_tool(schema)}, "required")
        except HearthError as exc:
            assert exc.code == ErrorCode.INVALID_INPUT
            continue
        for low, high in re.findall(r"\{(\d+),(\d*)\}", str(grammar)):
            assert int(low) <= limits.max_repeat
            assert not high or int(low) <= int(high) <= limits.max_repeat


def test_min_above_max_is_invalid_input() -> None:
    with pytest.raises(HearthError) as caught:
        tool_grammar({"t": text_tool({"type": "string", "minLength": 9, "maxLength": 3})})
    assert caught.value.code == ErrorCode.INVALID_INPUT


def test_escapes_are_gbnf_and_unwritable_enum_values_are_left_out() -> None:
    grammar = str(tool_grammar({"t": text_tool({"enum": ["a\fb", "😀", '"q"\\', "\x85"]})}))
    assert r'"\x0C"' not in grammar and r"\x85" not in grammar.split("json-")[0]
    assert r"\U0001F600" in grammar and r'"\"q\"\\"' in grammar
    with pytest.raises(HearthError) as caught:
        tool_grammar({"t": text_tool({"type": "string", "enum": ["\f"]})})
    assert caught.value.code == ErrorCode.INVALID_INPUT


def test_a_pattern_re2_cannot_run_is_invalid_input() -> None:
    for pattern in ("(a)\\1", "(?=a)b", "a(?!b)"):
        with pytest.raises(HearthError) as caught:
            check_schemas({"t": text_tool({"type": "string", "pattern": pattern})})
        assert caught.value.code == ErrorCode.INVALID_INPUT


def test_the_catastrophic_pattern_is_checked_in_linear_time_off_the_event_loop() -> None:
    schemas = {"t": text_tool(ISSUE_SCHEMAS["catastrophic_pattern"])}
    check_schemas(schemas)

    async def go() -> None:
        with trio.fail_after(10):  # before: 30 s and more, blocking the loop
            await validate_calls([ToolCall("t", {"text": FREEZE})], schemas)

    with pytest.raises(ModelOutputError, match="does not match"):
        trio.run(go)


def test_a_node_survives_hostile_schemas_and_serves_a_good_phone(node, phone) -> None:  # noqa: F811
    for name, schema in ISSUE_SCHEMAS.items():
        hostile = PlanRequest(
            request_id=f"bad-{name}".replace("_", "-"),
            tool_choice="required",
            tools=[
                ToolSpec.model_validate(
                    {"function": {"name": "t", "parameters": text_tool(schema)}}
                )
            ],
            conversation=[ChatMessage(role="user", content="write it")],
            limits=Limits(max_rounds=2, max_steps=1, max_tokens=64),
        )
        try:
            outcome = plan(phone, node, hostile)
        except HearthError as exc:
            assert exc.code in (ErrorCode.INVALID_INPUT, ErrorCode.PLAN_REJECTED), name
        else:  # only where a writable value exists
            assert name == "backspace_enum"
            assert outcome.plans[0].steps[0].arguments == {"text": "ok"}
        assert node.proc.poll() is None, f"the node died on {name}"
    outcome = plan(phone, node, request())
    assert outcome.plans and outcome.plans[0].steps
    assert {s.tool for s in outcome.plans[0].steps} <= {t.function.name for t in TOOLS}


def test_the_phones_local_route_refuses_hostile_schemas_with_a_type(tiny_models) -> None:
    """The same schemas on the phone's own model, in this very process (before: SIGSEGV)."""
    from hearth.companion.local_model import LocalModel

    local = LocalModel(tiny_models[1], n_ctx=1024)
    limits = Limits(max_steps=1, max_tokens=48, max_value_chars=10)

    async def go() -> list[str]:
        outcomes = []
        for schema in ISSUE_SCHEMAS.values():
            spec = ToolSpec.model_validate(
                {"function": {"name": "t", "parameters": text_tool(schema)}}
            )
            try:
                result = await local.plan(
                    "write it", [spec], "phone", limits=limits, mode="required"
                )
            except HearthError as exc:
                outcomes.append(exc.code.value)
            else:
                outcomes.append("plan" if result.plan else "answer")
        return outcomes

    outcomes = trio.run(go)
    assert set(outcomes) <= {"invalid_input", "plan_rejected", "plan"}, outcomes
    assert outcomes[1] == "invalid_input"  # the form-feed enum: nothing writable
