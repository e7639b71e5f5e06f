"""llama.cpp GBNF grammars built from tool schemas, so that output always parses.

The output is either a plain answer or up to `max_calls` XML tool calls (the
Qwen3.5 form). Strings exclude control characters and `<` (so a value can never
close its own tag early); every repetition is bounded, so a random or confused
model still ends inside the grammar instead of running into the token limit.
Rules the grammar does not encode (integer ranges, patterns) are checked after
parsing by `validate`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

Mode = Literal["auto", "required", "none"]

STRING_CHAR = r"[^<\x00-\x1f\x7f]"
ANSWER_CHAR = r"[^<\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
DEFAULT_MAX_STRING = 120
MAX_ANSWER = 400
_JSON_RULES = rf"""
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{{" ( json-string ":" json-value ( "," json-string ":" json-value ){{0,7}} )? "}}"
json-array ::= "[" ( json-value ( "," json-value ){{0,7}} )? "]"
json-string ::= "\"" ( [^"\\\x00-\x1f\x7f] | "\\" ["\\/bfnrt] ){{0,{DEFAULT_MAX_STRING}}} "\""
json-number ::= "-"? [0-9]{{1,15}} ( "." [0-9]{{1,6}} )?
"""


def literal(text: str) -> str:
    """A GBNF string literal."""
    return json.dumps(text, ensure_ascii=False)


def _rule_name(*parts: str) -> str:
    return "-".join(re.sub(r"[^a-zA-Z0-9]", "-", p) for p in parts).lower()


def _value(schema: dict[str, Any]) -> str:
    """A GBNF expression for one XML parameter value."""
    if "enum" in schema:
        return (
            "( "
            + " | ".join(
                literal(v if isinstance(v, str) else json.dumps(v)) for v in schema["enum"]
            )
            + " )"
        )
    kind = schema.get("type")
    if kind == "integer":
        bound = max(abs(int(schema.get("minimum", 0))), abs(int(schema.get("maximum", 10**15))))
        digits = max(1, min(15, len(str(bound))))
        sign = '"-"? ' if schema.get("minimum", -1) < 0 else ""
        return f"{sign}[0-9]{{1,{digits}}}"
    if kind == "number":
        return '"-"? [0-9]{1,15} ( "." [0-9]{1,6} )?'
    if kind == "boolean":
        return '( "true" | "false" )'
    if kind in ("object", "array"):
        return "json-value"
    longest = int(schema.get("maxLength", DEFAULT_MAX_STRING))
    shortest = min(int(schema.get("minLength", 1)), longest)
    return f"{STRING_CHAR}{{{shortest},{min(longest, DEFAULT_MAX_STRING)}}}"


def _tool_rules(name: str, schema: dict[str, Any]) -> tuple[str, list[str]]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    ordered = [p for p in properties if p in required] + [
        p for p in properties if p not in required
    ]
    rule = _rule_name("tool", name)
    parts = [literal(f"{name}>\n")]
    rules = []
    for prop in ordered:
        prule = _rule_name("param", name, prop)
        rules.append(
            f"{prule} ::= {literal(f'<parameter={prop}>' + chr(10))} {_value(properties[prop])} "
            f"{literal(chr(10) + '</parameter>' + chr(10))}"
        )
        parts.append(prule if prop in required else f"{prule}?")
    rules.append(f"{rule} ::= " + " ".join(parts))
    return rule, rules


def tool_grammar(tools: dict[str, dict[str, Any]], mode: Mode = "auto", max_calls: int = 4) -> str:
    """The grammar for one round: an answer, tool calls, or either (`mode`)."""
    rules = [f"answer ::= [^<\\x00-\\x1f\\x7f] {ANSWER_CHAR}{{0,{MAX_ANSWER}}}"]
    if mode == "none" or not tools:
        return "root ::= answer\n" + "\n".join(rules) + "\n"
    alternatives = []
    for name, schema in tools.items():
        rule, tool_rules = _tool_rules(name, schema)
        alternatives.append(rule)
        rules += tool_rules
    rules.append(
        'call ::= "<tool_call>\\n<function=" ( '
        + " | ".join(alternatives)
        + ' ) "</function>\\n</tool_call>"'
    )
    rules.append(f'calls ::= call ( "\\n" call ){{0,{max(0, max_calls - 1)}}}')
    root = "calls" if mode == "required" else "calls | answer"
    return f"root ::= {root}\n" + "\n".join(rules) + _JSON_RULES
