"""Tool calls in model output, in both forms the Qwen family emits.

Hermes JSON: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
XML (Qwen3.5): `<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>`

XML values are text; `coerce` turns them into the JSON types the schema asks for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_FUNCTION = re.compile(r"^\s*<function=([^>\n]+)>(.*?)</function>\s*$", re.S)
_PARAM = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.S)


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


def parse_generation(output: str, finish: str, schemas: dict[str, dict[str, Any]]) -> Parsed:
    """`parse`, knowing how generation ended: a text answer cut by the token limit is
    kept and marked truncated; a cut tool call is an error (`parse` raises)."""
    parsed = parse(output, schemas)
    if finish == "length" and not parsed.calls:
        parsed.text += " …"
        parsed.truncated = True
    return parsed


def parse(output: str, schemas: dict[str, dict[str, Any]] | None = None) -> Parsed:
    """Parse `output`; `schemas` (tool name → JSON schema) types the XML values.

    A `<tool_call>` that is never closed means the output was cut (token limit):
    that is an error, never a half call.
    """
    schemas = schemas or {}
    calls = []
    for body in _CALL.findall(output):
        calls.append(_parse_one(body.strip(), schemas))
    rest = _CALL.sub("", output)
    if "<tool_call>" in rest or "<function=" in rest:
        raise ModelOutputError("a tool call was cut off (token limit?)")
    if "</think>" in rest:
        rest = rest.split("</think>", 1)[1]
    return Parsed(text=rest.strip(), calls=calls)


def _parse_one(body: str, schemas: dict[str, dict[str, Any]]) -> ToolCall:
    if body.startswith("{"):
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ModelOutputError(f"tool call is not valid JSON: {exc.msg}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ModelOutputError("JSON tool call needs a string `name`")
        arguments = data.get("arguments", {})
        if isinstance(arguments, str):  # some models double-encode
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise ModelOutputError("tool call arguments are not JSON") from exc
        if not isinstance(arguments, dict):
            raise ModelOutputError("tool call arguments must be an object")
        return ToolCall(data["name"], arguments)
    match = _FUNCTION.match(body)
    if match is None:
        raise ModelOutputError("tool call is neither JSON nor <function=…> XML")
    name = match.group(1).strip()
    properties = schemas.get(name, {}).get("properties", {})
    arguments = {
        key.strip(): coerce(value, properties.get(key.strip(), {}))
        for key, value in _PARAM.findall(match.group(2))
    }
    return ToolCall(name, arguments)


def coerce(text: str, schema: dict[str, Any]) -> Any:
    """An XML parameter's text as the JSON type its schema names (text if unsure)."""
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(text.strip())
        if kind == "number":
            return float(text.strip())
        if kind == "boolean" and text.strip() in ("true", "false"):
            return text.strip() == "true"
        if kind in ("object", "array", "null"):
            return json.loads(text)
    except ValueError:
        return text  # left as text: schema validation reports the type error
    return text
