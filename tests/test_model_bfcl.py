"""Issue 16: BFCL v4's AST categories through the tool grammar. For every kept case,
the ground truth written as calls is accepted by llama.cpp's own grammar sampler
token by token (the tiny model's real byte-level tokenizer), parses back exactly
and validates against its schemas."""

from __future__ import annotations

import pytest

from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.runtime import LlamaRuntime
from hearth.protocol.model.sampling import first_rejected
from hearth.protocol.model.toolcalls import ModelOutputError, ToolCall, parse, render_calls
from hearth.protocol.model.validate import check_schemas, validate_call
from hearth.protocol.wire.errors import HearthError

from .bfcl import CATEGORIES, excluded, load

PHONE_CALL_LIMIT = 8  # companion/local_model.py's default calls per round


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=512)


def undeclared(value, schema, path: str = "") -> str | None:  # type: ignore[no-untyped-def]
    """The first argument (or nested key) its schema does not declare: the grammar
    writes declared properties only, so such ground truth cannot be produced."""
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            if found := undeclared(item, schema["items"], f"{path}/{i}"):
                return found
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        for key, item in value.items():
            if key not in schema["properties"]:
                return f"{path}/{key}"
            if found := undeclared(item, schema["properties"][key], f"{path}/{key}"):
                return found
    return None


def excluded_here(case) -> str | None:  # type: ignore[no-untyped-def]
    """Why a case is left out of this test (its data, not the grammar), or None."""
    schemas = {f.name: f.parameters for f in case.functions}
    for c in case.calls:
        if where := undeclared(c.arguments, schemas[c.name]):
            return f"{c.name}: argument {where} is not in the function's schema"
    return None


def check(runtime: LlamaRuntime, case) -> str | None:  # type: ignore[no-untyped-def]
    """Why the case fails, or None."""
    schemas = {f.name: f.parameters for f in case.functions}
    calls = [ToolCall(c.name, c.arguments) for c in case.calls]
    try:
        check_schemas(schemas)
        grammar = tool_grammar(schemas, "auto", max_calls=max(len(calls), 1))
    except HearthError as exc:
        return f"schemas: {exc}"
    assert grammar is not None
    text = render_calls(calls, schemas)
    tokens = runtime.tokenize(text)
    refused = first_rejected(runtime._lib, runtime.llm, grammar, tokens)
    if refused is not None:
        seen = runtime.llm.detokenize(tokens[:refused]).decode(errors="replace")
        return f"grammar refused after {seen[-60:]!r}"
    try:
        parsed = parse(text, schemas)
    except ModelOutputError as exc:
        return f"parse: {exc}"
    if parsed.calls != calls or parsed.text:
        return f"parsed back as {parsed.calls!r:.200}"
    try:
        for c in parsed.calls:
            validate_call(c, schemas)
    except ModelOutputError as exc:
        return f"validate: {exc}"
    return None


@pytest.mark.parametrize("category", CATEGORIES)
def test_bfcl_ground_truth_is_accepted_parsed_back_and_valid(runtime, category: str) -> None:
    cases = []
    for case in load(category):
        if why := excluded_here(case):
            print(f"\nexcluded {case.id}: {why}")
        else:
            cases.append(case)
    failures = {case.id: why for case in cases if (why := check(runtime, case)) is not None}
    within = sum(len(case.calls) <= PHONE_CALL_LIMIT for case in cases)
    prefix = f"{category}_"
    left_out = [e.id for e in excluded() if e.id.startswith(prefix) and e.id[len(prefix)].isdigit()]
    print(
        f"\nBFCL {category}: {len(cases) - len(failures)}/{len(cases)} accepted, parsed back "
        f"and valid; {within}/{len(cases)} within {PHONE_CALL_LIMIT} calls; "
        f"{len(left_out)} left out by the data (tests/data/bfcl/excluded.json)"
    )
    assert not failures, failures
