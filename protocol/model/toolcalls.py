"""Tool calls in model output, in both forms the Qwen family emits.

Hermes JSON: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
XML (Qwen3.5): `<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>`

XML values are text; `coerce` turns them into the JSON types the schema asks for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .callformats import QWEN_XML, CallFormat
from .limits import DEFAULT_LIMITS

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"
FUNCTION_CLOSE = "</function>"
THINK_END = "</think>"
VALUE_END = "\n" + PARAM_CLOSE  # a text value never holds this: it ends the value
_FUNCTION = re.compile(r"^\s*<function=([^>\n]+)>\n?(.*)$", re.S)


class ModelOutputError(HearthError):
    """The model's output is not a usable answer or tool call."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.PLAN_REJECTED, message)


@dataclass
class ToolCall:
    """One parsed call: the tool's name and its arguments (JSON values)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Parsed:
    """Model output split into text (outside tool calls) and calls."""

    text: str
    calls: list[ToolCall]
    truncated: bool = False


def parse_generation(
    output: str,
    finish: str,
    schemas: dict[str, dict[str, Any]],
    *,
    calls: bool = True,
    thinking: bool = False,
    call_format: CallFormat = QWEN_XML,
) -> Parsed:
    """`parse`, knowing how generation ended: a text answer cut by the token limit is
    kept as it is and marked truncated; a cut tool call is an error (`parse` raises). With
    `thinking`, the output may open inside a thinking block: everything up to its
    `</think>` is thinking, never prose or a call (a runtime that streamed the block
    apart hands on only what follows it)."""
    if thinking and THINK_END in output:
        output = output.split(THINK_END, 1)[1]
    parsed = parse(output, schemas, calls=calls, call_format=call_format)
    parsed.truncated = finish == "length" and not parsed.calls
    return parsed


def parse(
    output: str,
    schemas: dict[str, dict[str, Any]] | None = None,
    *,
    calls: bool = True,
    call_format: CallFormat = QWEN_XML,
) -> Parsed:
    """Split `output` (what follows any thinking block) into prose and tool calls;
    `schemas` (tool name → JSON schema) types the XML values. With `calls` False (a
    round that allowed none) everything is prose.

    Prose ends at the first `<tool_call>`; from there on come calls, and only calls.
    A `<tool_call>` that is never closed means the output was cut (token limit):
    that is an error, never a half call. Text values come back byte for byte: a value
    ends at the first `\n</parameter>` (which the grammar never lets it hold).
    Reading unions against their schemas takes at most `ValidationLimits.readings_s`.
    """
    from .validate import within  # validate imports this module

    schemas = schemas or {}
    start = output.find(call_format.open) if calls else -1
    if start < 0:
        return Parsed(text=output.strip(), calls=[])
    if not call_format.close:  # bare JSON objects (Llama 3.x): a call opens the output
        if start > 0:  # the grammar never started: JSON inside prose is prose
            return Parsed(text=output.strip(), calls=[])
        return Parsed(text="", calls=_bare_json_calls(output))
    found = []
    rest = output[start:]
    with within(DEFAULT_LIMITS.validation.readings_s):
        while rest.startswith(CALL_OPEN):
            json_call = _tagged_json(rest[len(CALL_OPEN) :])
            if json_call is not None:  # a value may hold `</tool_call>`: the object ends it
                found.append(json_call[0])
                rest = json_call[1]
                continue
            end = rest.find(CALL_CLOSE)
            if end < 0:
                raise ModelOutputError("a tool call was cut off (token limit?)")
            found.append(_parse_one(rest[len(CALL_OPEN) : end], schemas))
            rest = rest[end + len(CALL_CLOSE) :].lstrip()
    if rest:
        raise ModelOutputError("text after the tool calls")
    return Parsed(text=output[:start].strip(), calls=found)


def _tagged_json(inner: str) -> tuple[ToolCall, str] | None:
    """A Hermes call's JSON object read to its own end, and what follows its closing
    tag; None when the body is no complete JSON object closed by `</tool_call>` (the
    tag-delimited reading then decides, and says what is wrong)."""
    body = inner.lstrip()
    if not body.startswith("{"):
        return None
    try:
        _, end = json.JSONDecoder().raw_decode(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    after = body[end:].lstrip()
    if not after.startswith(CALL_CLOSE):
        return None
    return _parse_json(body[:end]), after[len(CALL_CLOSE) :].lstrip()


def _bare_json_calls(rest: str) -> list[ToolCall]:
    """Calls written as bare JSON objects one after another (`;` or whitespace apart);
    an object never closed means the output was cut."""
    found = []
    decoder = json.JSONDecoder()
    while rest:
        try:
            _, end = decoder.raw_decode(rest)
        except json.JSONDecodeError as exc:
            raise ModelOutputError("a tool call was cut off (token limit?)") from exc
        except RecursionError as exc:
            raise ModelOutputError("a value nested too deep") from exc
        found.append(_parse_json(rest[:end]))
        rest = rest[end:].lstrip().removeprefix(";").lstrip()
    return found


def _parse_one(body: str, schemas: dict[str, dict[str, Any]]) -> ToolCall:
    if body.strip().startswith("{"):
        return _parse_json(body.strip())
    match = _FUNCTION.match(body)
    if match is None:
        raise ModelOutputError("tool call is neither JSON nor <function=…> XML")
    name = match.group(1).strip()
    root = schemas.get(name, {})
    properties = root.get("properties", {})
    arguments: dict[str, Any] = {}
    rest = match.group(2)
    while True:
        rest = rest.lstrip()
        if not rest.startswith(PARAM_OPEN):
            break
        key_end = rest.find(">")
        if key_end < 0:
            raise ModelOutputError("a parameter's name is not closed")
        key = rest[len(PARAM_OPEN) : key_end]
        key = key if key in properties else key.strip()  # a schema's name exactly as written
        rest = rest[key_end + 1 :]
        rest = rest[1:] if rest.startswith("\n") else rest
        end = rest.find(VALUE_END)
        close = len(VALUE_END)
        if end < 0:  # not written under the grammar: `<parameter=k>value</parameter>`
            end, close = rest.find(PARAM_CLOSE), len(PARAM_CLOSE)
        if end < 0:
            raise ModelOutputError(f"parameter {key!r} is not closed")
        schema = properties.get(key, {}) if isinstance(properties, dict) else {}
        schema = schema if isinstance(schema, dict) else {}
        arguments[key] = coerce(rest[:end], schema, _fits_in(root, schema))
        rest = rest[end + close :]
    if rest.strip() != FUNCTION_CLOSE:
        raise ModelOutputError("a tool call's function is not closed")
    return ToolCall(name, arguments)


def json_depth(value: Any, limit: int | None = None) -> int:
    """Nesting depth of a JSON value (a scalar: 1; tuples count as lists), without
    recursion; with a `limit`, counting stops past it (returns `limit + 1`)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if limit is not None and deepest > limit:
            return limit + 1
        if isinstance(item, dict):
            stack += [(v, level + 1) for v in item.values()]
        elif isinstance(item, list | tuple):
            stack += [(v, level + 1) for v in item]
    return deepest


def _loads(text: str) -> Any:
    """`json.loads`, refusing a value nested past `ValidationLimits.max_value_depth`:
    whatever handles it later (validation, rendering, the wire) recurses over it."""
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise ModelOutputError("a value nested too deep") from exc
    if json_depth(value) > DEFAULT_LIMITS.validation.max_value_depth:
        raise ModelOutputError("a value nested too deep")
    return value


def _parse_json(body: str) -> ToolCall:
    try:
        data = _loads(body)
    except json.JSONDecodeError as exc:
        raise ModelOutputError(f"tool call is not valid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ModelOutputError("JSON tool call needs a string `name`")
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):  # some models double-encode
        try:
            arguments = _loads(arguments)
        except json.JSONDecodeError as exc:
            raise ModelOutputError("tool call arguments are not JSON") from exc
    if not isinstance(arguments, dict):
        raise ModelOutputError("tool call arguments must be an object")
    return ToolCall(data["name"], arguments)


def schema_kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema names (or implies by its keywords); empty: any."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    if "properties" in schema or "required" in schema:
        return {"object"}
    if "items" in schema or "prefixItems" in schema:
        return {"array"}
    return set()


def _fits_in(root: Any, schema: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether a value fits `schema`, a parameter's schema within the tool's `root`."""

    def fits(value: Any) -> bool:
        from .validate import fits as fits_schema  # validate imports this module

        return fits_schema(root, schema, value)

    return fits


def coerce(
    text: str, schema: dict[str, Any], fits: Callable[[Any], bool] = lambda value: True
) -> Any:
    """An XML parameter's text as its schema types it: text for strings (as written),
    JSON for the rest, JSON first for a union that includes strings if the JSON reading
    `fits` the schema (else the text the grammar let through as text); an `enum`'s
    text value as text. Text if it is not JSON (validation reports the type)."""
    kinds = schema_kinds(schema)
    enum = schema.get("enum")
    if kinds == {"string"} or (isinstance(enum, list) and text in enum):
        return text
    try:
        value = _loads(text)  # the grammar's JSON values have no depth bound
    except json.JSONDecodeError:
        return text
    if "string" in kinds and (isinstance(value, str) or not fits(value)):
        return text  # a JSON string literal written where text was allowed stays text
    return value


def render_calls(calls: list[ToolCall], schemas: dict[str, dict[str, Any]] | None = None) -> str:
    """Calls as the model writes them (what the grammar accepts and `parse` reads
    back): parameters in their schema's order, text as is, the rest compact JSON.
    Arguments nested past `ValidationLimits.max_value_depth` are `invalid_input`."""
    depth = max((json_depth(c.arguments) for c in calls), default=0)
    if depth > DEFAULT_LIMITS.validation.max_value_depth + 1:  # + the arguments' object
        raise HearthError(ErrorCode.INVALID_INPUT, "a tool call's arguments nest too deep")
    out = []
    for call in calls:
        properties = (schemas or {}).get(call.name, {}).get("properties", {})
        order = [k for k in properties if k in call.arguments]
        order += [k for k in call.arguments if k not in order]
        params = "".join(
            f"{PARAM_OPEN}{key}>\n"
            f"{_value_text(call.arguments[key], properties.get(key, {}))}{VALUE_END}\n"
            for key in order
        )
        out.append(f"{CALL_OPEN}\n<function={call.name}>\n{params}{FUNCTION_CLOSE}\n{CALL_CLOSE}")
    return "\n".join(out)


def _value_text(value: Any, schema: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(_in_schema_order(value, schema), ensure_ascii=False, separators=(",", ":"))


def _in_schema_order(value: Any, schema: Any) -> Any:
    """Objects with their keys in their schema's order (as the grammar writes them)."""
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(value, list):
        return [_in_schema_order(v, schema.get("items", {})) for v in value]
    if not isinstance(value, dict):
        return value
    properties = schema.get("properties", {})
    properties = properties if isinstance(properties, dict) else {}
    order = [k for k in properties if k in value] + [k for k in value if k not in properties]
    return {k: _in_schema_order(value[k], properties.get(k, {})) for k in order}
