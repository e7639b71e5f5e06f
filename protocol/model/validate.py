"""Validate tool calls against the tool schemas the phone sent, before any plan is sent.

The grammar keeps output parseable; it does not encode every rule (integer bounds,
lengths past the grammar's caps, patterns), so every call is checked again here.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .toolcalls import ModelOutputError, ToolCall

MAX_SAFE_INTEGER = 2**53


def check_schemas(schemas: dict[str, dict[str, Any]]) -> None:
    """Refuse tool schemas that are not valid JSON Schema (`invalid_input`)."""
    for name, schema in schemas.items():
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise HearthError(
                ErrorCode.INVALID_INPUT, f"tool {name}: invalid schema: {exc.message}"
            ) from exc


def validate_call(call: ToolCall, schemas: dict[str, dict[str, Any]]) -> None:
    """Raise `ModelOutputError` unless `call` names a known tool and fits its schema."""
    if call.name not in schemas:
        raise ModelOutputError(f"unknown tool {call.name!r}")
    _check_values(call.name, call.arguments)
    errors = sorted(
        Draft202012Validator(schemas[call.name]).iter_errors(call.arguments),
        key=lambda e: list(e.path),
    )
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "arguments"
        raise ModelOutputError(f"{call.name}: {where}: {errors[0].message}")


def _check_values(tool: str, value: Any, path: str = "") -> None:
    if isinstance(value, str):
        if any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in value):
            raise ModelOutputError(f"{tool}: {path or 'argument'}: control character")
    elif isinstance(value, bool):
        return
    elif isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        raise ModelOutputError(f"{tool}: {path or 'argument'}: integer beyond 2^53")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_values(tool, item, f"{path}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_values(tool, item, f"{path}/{i}")
