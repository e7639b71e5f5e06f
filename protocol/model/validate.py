"""Validate tool calls against the tool schemas the phone sent, before any plan is sent.

The grammar keeps output parseable; it does not encode every rule (integer bounds,
lengths past the grammar's counts, patterns), so every call is checked again here.

Regular expressions (`pattern`, `patternProperties`) run on RE2 (google-re2):
linear time, no backtracking, so no pattern can freeze a process; a pattern RE2
cannot compile (backreferences, lookaround) is refused by `check_schemas` as
`invalid_input`, and so are patterns that cost too much to compile, alone
(`ValidationLimits.max_pattern_memory`) or together (`max_pattern_program`).
A `$ref` resolves only inside the schema (or to a JSON Schema meta-schema): nothing
is ever fetched. `check_schemas` also bounds what `$ref`s expand to
(`ValidationLimits.max_expanded_nodes`), so `$ref`s that fan out exponentially are
refused up front; what recursion still costs is bounded by time: a validation stops
itself at its deadline (`within`), never left burning a core.
`validate_calls` runs off the event loop, in a worker thread, under that deadline
(`ValidationLimits.deadline_s`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import re2
import referencing.exceptions
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema_specifications import REGISTRY as META_SCHEMAS
from referencing.jsonschema import DRAFT202012

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .digests import ByDigest
from .limits import DEFAULT_LIMITS, ModelLimits
from .toolcalls import ModelOutputError, ToolCall, json_depth

MAX_SAFE_INTEGER = 2**53


@functools.lru_cache(maxsize=128)
def _regex(pattern: str, max_mem: int = DEFAULT_LIMITS.validation.max_pattern_memory) -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported as invalid_input
    options.max_mem = max_mem
    return re2.compile(pattern, options)


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


_CLOCK = threading.local()  # `deadline`: when validation in this thread must stop


def _on_time(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """`keyword`, refusing to start past this thread's deadline (every step of a
    validation goes through a keyword, so a validation stops within one step)."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if time.monotonic() > getattr(_CLOCK, "deadline", math.inf):
            raise HearthError(ErrorCode.TIMED_OUT, "checking against the schema took too long")
        return keyword(validator, value, instance, schema)

    return check


_KEYWORDS = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
}
# types-jsonschema leaves validators.extend unannotated
_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {name: _on_time(kw) for name, kw in _KEYWORDS.items()}
)


def validator(schema: Any) -> Any:
    """A validator for `schema`: RE2 patterns, `$ref`s resolved locally only (an
    unknown one is `Unresolvable`, never fetched), stopping at the thread's deadline."""
    return _Validator(schema, registry=META_SCHEMAS)


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Validations in this thread (within the block) raise `timed_out` once `seconds`
    have passed."""
    before = getattr(_CLOCK, "deadline", math.inf)
    _CLOCK.deadline = min(before, time.monotonic() + seconds)
    try:
        yield
    finally:
        _CLOCK.deadline = before


_DATA = frozenset({"const", "enum", "default", "examples"})  # values, not schemas


def _expanded_size(schema: Any, limit: int) -> int:
    """How many schema nodes checking one value may visit, each `$ref` counted as what
    it names (memoised per target, so this is linear in the schema; a `$ref` back into
    its own expansion, recursion that the value's depth bounds, counts once). Counting
    stops past `limit`; `RecursionError` for `$ref` chains too deep to follow."""
    memo: dict[int, int] = {}
    expanding: set[int] = set()

    def size(node: Any, resolver: Any) -> int:
        if isinstance(node, list):
            total = 1
            for item in node:
                total += size(item, resolver)
                if total > limit:
                    break
            return total
        if not isinstance(node, dict):
            return 1
        if id(node) in memo:
            return memo[id(node)]
        if id(node) in expanding:
            return 1
        expanding.add(id(node))
        if isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        total = 1
        for key, value in node.items():
            if total > limit:
                break
            if key not in _DATA:
                total += size(value, resolver)
            if key in ("$ref", "$dynamicRef") and isinstance(value, str) and total <= limit:
                with contextlib.suppress(referencing.exceptions.Unresolvable):
                    found = resolver.lookup(value)
                    total += size(found.contents, found.resolver)
        expanding.discard(id(node))
        memo[id(node)] = total
        return total

    return size(schema, META_SCHEMAS.resolver_with_root(DRAFT202012.create_resource(schema)))


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


def _unusable_number(value: Any) -> bool:
    """Whether `value` holds a number beyond 64 bits or not finite (JSON from a tool
    server may: no grammar, float or msgpack can carry it), without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int) and not -(2**63) <= item < 2**64:
            return True
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return False


SCHEMA_SETS_KEPT = 64  # sets of tool schemas known to pass `check_schemas`
_passed: ByDigest[bool] = ByDigest(SCHEMA_SETS_KEPT)


def check_schemas(schemas: dict[str, dict[str, Any]], limits: ModelLimits = DEFAULT_LIMITS) -> None:
    """Refuse tool schemas that are not valid JSON Schema, are too big or too deep, hold
    a number beyond 64 bits or a regular expression RE2 cannot run, or whose `$ref`s
    expand past `ValidationLimits.max_expanded_nodes` (`invalid_input`).

    The checks depend on the schemas and the limits alone: a set that passed is known
    by its digest and not checked again (the same tools come with every request)."""

    def check() -> bool:
        _check_schemas(schemas, limits)
        return True

    _passed.get(schemas, limits, check)


def _check_schemas(schemas: dict[str, dict[str, Any]], limits: ModelLimits) -> None:
    grammar, checks = limits.grammar, limits.validation
    program = checks.max_pattern_program  # what compiling is left, for all the tools
    if len(schemas) > grammar.max_tools:
        raise HearthError(ErrorCode.INVALID_INPUT, f"more than {grammar.max_tools} tools")
    for name, schema in schemas.items():
        if len(json.dumps(schema, default=str)) > grammar.max_schema_bytes:
            raise HearthError(ErrorCode.INVALID_INPUT, f"tool {name}: schema too large")
        if json_depth(schema) > 2 * grammar.max_schema_depth:
            raise HearthError(ErrorCode.INVALID_INPUT, f"tool {name}: schema nested too deep")
        if _unusable_number(schema):
            raise HearthError(
                ErrorCode.INVALID_INPUT, f"tool {name}: a number beyond 64 bits or not finite"
            )
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise HearthError(
                ErrorCode.INVALID_INPUT, f"tool {name}: invalid schema: {exc.message}"
            ) from exc
        try:
            expanded = _expanded_size(schema, checks.max_expanded_nodes)
        except RecursionError as exc:
            raise HearthError(
                ErrorCode.INVALID_INPUT, f"tool {name}: its $refs nest too deep"
            ) from exc
        if expanded > checks.max_expanded_nodes:
            raise HearthError(
                ErrorCode.INVALID_INPUT,
                f"tool {name}: its $refs expand to more than {checks.max_expanded_nodes} "
                "schema nodes",
            )
        for pattern in _patterns(schema):
            if len(pattern.encode()) > checks.max_pattern_bytes:
                raise HearthError(ErrorCode.INVALID_INPUT, f"tool {name}: pattern too long")
            try:
                compiled = _regex(pattern, checks.max_pattern_memory)
            except re2.error as exc:
                raise HearthError(
                    ErrorCode.INVALID_INPUT,
                    f"tool {name}: pattern {pattern[:60]!r} is not RE2 syntax "
                    "(no backreferences or lookaround) or too large to compile",
                ) from exc
            program -= compiled.programsize + max(compiled.reverseprogramsize, 0)
            if program < 0:
                raise HearthError(
                    ErrorCode.INVALID_INPUT,
                    f"tool {name}: the patterns compile to more than "
                    f"{checks.max_pattern_program} RE2 instructions in all",
                )


def validate_call(call: ToolCall, schemas: dict[str, dict[str, Any]]) -> None:
    """Raise `ModelOutputError` unless `call` names a known tool and fits its schema
    (`timed_out` past the deadline of an enclosing `within`)."""
    if call.name not in schemas:
        raise ModelOutputError(f"unknown tool {call.name!r}")
    _check_values(call.name, call.arguments)
    try:
        errors = sorted(
            validator(schemas[call.name]).iter_errors(call.arguments),
            key=lambda e: [str(p) for p in e.path],
        )
    except (RecursionError, re2.error, referencing.exceptions.Unresolvable) as exc:
        raise ModelOutputError(f"{call.name}: the schema cannot be checked") from exc
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "arguments"
        raise ModelOutputError(f"{call.name}: {where}: {errors[0].message}")


def fits(root: Any, schema: Any, value: Any, limits: ModelLimits = DEFAULT_LIMITS) -> bool:
    """Whether `value` fits `schema`, a part of the tool schema `root` (its `$ref`s
    resolve there). Undecided within `ValidationLimits.reading_s` or uncheckable: True
    (the call's validation decides)."""
    try:
        with within(limits.validation.reading_s):
            return bool(validator(root).evolve(schema=schema).is_valid(value))
    except (HearthError, RecursionError, re2.error, referencing.exceptions.Unresolvable):
        return True


async def validate_calls(
    calls: list[ToolCall],
    schemas: dict[str, dict[str, Any]],
    limits: ModelLimits = DEFAULT_LIMITS,
) -> None:
    """`validate_call` for each call, in a worker thread, within the deadline
    (`timed_out` past it); the event loop never waits on a schema."""
    deadline = limits.validation.deadline_s

    def work() -> None:
        with within(deadline):
            for call in calls:
                validate_call(call, schemas)

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
