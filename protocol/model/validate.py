"""Validate tool calls against the tool schemas the phone sent, before any plan is sent.

The grammar keeps output parseable; it does not encode every rule (integer bounds,
lengths past the grammar's counts, patterns), so every call is checked again here.

Regular expressions (`pattern`, `patternProperties`) run on RE2 (google-re2):
linear time, no backtracking, so no pattern can freeze a process; a pattern RE2
cannot compile (backreferences, lookaround) is refused by `check_schemas` as
`invalid_input`. `validate_calls` runs off the event loop, in a worker thread, under
a deadline (`ValidationLimits.deadline_s`).
"""

from __future__ import annotations

import functools
import json
import math
import unicodedata
from collections.abc import Iterator
from typing import Any

import anyio
import re2
import referencing.exceptions
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .limits import DEFAULT_LIMITS, ModelLimits
from .toolcalls import ModelOutputError, ToolCall

MAX_SAFE_INTEGER = 2**53


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is reported as invalid_input


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> Any:
    return re2.compile(pattern, _RE2_OPTIONS)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, pattern_properties: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _regex(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


Validator = validators.extend(
    Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
)


def _patterns(schema: Any, depth: int = 0) -> Iterator[str]:
    """Every regular expression in `schema` (iteratively bounded by the depth check)."""
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            yield schema["pattern"]
        if isinstance(schema.get("patternProperties"), dict):
            yield from schema["patternProperties"]
        for value in schema.values():
            yield from _patterns(value, depth + 1)
    elif isinstance(schema, list):
        for value in schema:
            yield from _patterns(value, depth + 1)


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack += [(v, level + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, level + 1) for v in item]
    return deepest


def check_schemas(schemas: dict[str, dict[str, Any]], limits: ModelLimits = DEFAULT_LIMITS) -> None:
    """Refuse tool schemas that are not valid JSON Schema, are too big or too deep, or
    hold a regular expression RE2 cannot run (`invalid_input`)."""
    grammar, checks = limits.grammar, limits.validation
    if len(schemas) > grammar.max_tools:
        raise HearthError(ErrorCode.INVALID_INPUT, f"more than {grammar.max_tools} tools")
    for name, schema in schemas.items():
        if len(json.dumps(schema, default=str)) > grammar.max_schema_bytes:
            raise HearthError(ErrorCode.INVALID_INPUT, f"tool {name}: schema too large")
        if _depth(schema) > 2 * grammar.max_schema_depth:
            raise HearthError(ErrorCode.INVALID_INPUT, f"tool {name}: schema nested too deep")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise HearthError(
                ErrorCode.INVALID_INPUT, f"tool {name}: invalid schema: {exc.message}"
            ) from exc
        for pattern in _patterns(schema):
            if len(pattern.encode()) > checks.max_pattern_bytes:
                raise HearthError(ErrorCode.INVALID_INPUT, f"tool {name}: pattern too long")
            try:
                _regex(pattern)
            except re2.error as exc:
                raise HearthError(
                    ErrorCode.INVALID_INPUT,
                    f"tool {name}: pattern {pattern[:60]!r} is not RE2 syntax "
                    "(no backreferences or lookaround)",
                ) from exc


def validate_call(call: ToolCall, schemas: dict[str, dict[str, Any]]) -> None:
    """Raise `ModelOutputError` unless `call` names a known tool and fits its schema."""
    if call.name not in schemas:
        raise ModelOutputError(f"unknown tool {call.name!r}")
    _check_values(call.name, call.arguments)
    try:
        errors = sorted(
            Validator(schemas[call.name]).iter_errors(call.arguments),
            key=lambda e: [str(p) for p in e.path],
        )
    except (RecursionError, re2.error, referencing.exceptions.Unresolvable) as exc:
        raise ModelOutputError(f"{call.name}: the schema cannot be checked") from exc
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "arguments"
        raise ModelOutputError(f"{call.name}: {where}: {errors[0].message}")


async def validate_calls(
    calls: list[ToolCall],
    schemas: dict[str, dict[str, Any]],
    limits: ModelLimits = DEFAULT_LIMITS,
) -> None:
    """`validate_call` for each call, in a worker thread, within the deadline
    (`timed_out` past it); the event loop never waits on a schema."""

    def work() -> None:
        for call in calls:
            validate_call(call, schemas)

    deadline = limits.validation.deadline_s
    with anyio.move_on_after(deadline) as scope:
        await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    if scope.cancelled_caught:
        raise HearthError(
            ErrorCode.TIMED_OUT, f"checking the tool calls took longer than {deadline:g} s"
        )


def _check_values(tool: str, value: Any, path: str = "") -> None:
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in item):
                raise ModelOutputError(f"{tool}: {where or 'argument'}: control character")
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int) and abs(item) > MAX_SAFE_INTEGER:
            raise ModelOutputError(f"{tool}: {where or 'argument'}: integer beyond 2^53")
        elif isinstance(item, float) and not math.isfinite(item):
            raise ModelOutputError(f"{tool}: {where or 'argument'}: not a finite number")
        elif isinstance(item, dict):
            stack += [(v, f"{where}/{k}") for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(v, f"{where}/{i}") for i, v in enumerate(item)]
