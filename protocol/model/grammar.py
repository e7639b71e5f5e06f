"""llama.cpp GBNF grammars for tool calls, built from the phone's tool schemas.

Prose is free: in `auto` mode the grammar is lazy and starts at `<tool_call>` (as
llama.cpp's own server does for Qwen3.5); from there the output is one or more
well-formed XML calls (the Qwen3.5 form) of known tools, up to `max_calls`:

    <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>\n</tool_call>

A string VALUE is raw text: any character the validator accepts (newlines, tabs,
`<`, `&`, quotes, any script; no other control character, C1 included), never the
sequence `\n</parameter>` that would end it early, and as long as its schema says
(`minLength`/`maxLength`, counted exactly up to `GrammarLimits.max_counted_length`).
Other values are compact JSON typed by their schema (nested objects and arrays,
numbers in every JSON form within 2^53). Parameters come in the schema's order.

Every repetition count stays within `GrammarLimits` with m <= n, literals use only
escapes GBNF knows, and the size llama.cpp will build is estimated up front: past
the bound the request is `invalid_input`, before llama.cpp sees the grammar.
Rules a grammar cannot encode (patterns, integer minimums, `allOf`, …) are checked
after parsing by `validate`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any, Literal, Self

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import AnswerSettings

from .callformats import QWEN_XML, CallFormat
from .digests import ByDigest
from .limits import DEFAULT_LIMITS, GrammarLimits
from .toolcalls import CALL_OPEN, VALUE_END, schema_kinds

Mode = Literal["auto", "required", "none"]

MAX_SAFE_INTEGER = 2**53
_JSON_RULES = r"""
json-value ::= json-object | json-array | json-string | json-number | json-bool | "null"
json-object ::= "{" ( json-member ( json-comma json-member )* )? "}"
json-member ::= json-string json-colon json-value
json-array ::= "[" ( json-value ( json-comma json-value )* )? "]"
json-comma ::= "," " "?
json-colon ::= ":" " "?
json-string ::= "\"" json-char* "\""
json-char ::= JSON_CHAR | "\\" ["\\/nt]
json-number ::= "-"? json-uint ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,2} )?
json-bool ::= "true" | "false"
"""


class ToolGrammar(str):
    """GBNF text (usable wherever a grammar string is) and how to apply it: a `lazy`
    grammar waits for `trigger` and constrains the output from there on; an `anchored`
    one only when the output starts with it (a bare JSON call: anywhere else, such text
    is prose)."""

    lazy: bool
    trigger: str
    anchored: bool

    def __new__(
        cls, text: str, *, lazy: bool = False, trigger: str = CALL_OPEN, anchored: bool = False
    ) -> Self:
        grammar = super().__new__(cls, text)
        grammar.lazy = lazy
        grammar.trigger = trigger
        grammar.anchored = anchored
        return grammar


def literal(text: str) -> str:
    """A GBNF string literal: printable ASCII as is, everything else escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02X}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(f"\\U{code:08X}")
    out.append('"')
    return "".join(out)


def char_class(extra: str = "", without: str = "") -> str:
    """A positive character class: printable ASCII and everything from U+00A0 on
    (no control character, C1 included), plus `extra`, less the ASCII in `without`.

    Positive, not `[^…]`: llama.cpp checks a token that ends inside a UTF-8 sequence
    against the range of characters it could complete to, and a negated class that
    excludes any of that range (C1 is most of what `\\xC2` starts) refuses the token.
    """
    allowed = sorted({*range(0x20, 0x7F), *map(ord, extra)} - set(map(ord, without)))
    ranges: list[list[int]] = []
    for code in allowed:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    parts = [f"\\x{a:02X}" if a == b else f"\\x{a:02X}-\\x{b:02X}" for a, b in ranges]
    return "[" + "".join(parts) + "\\xA0-\\U0010FFFF]"


def _uint_at_most(bound: int) -> str:
    """Decimal integers 0..bound without leading zeros."""
    digits = str(bound)
    if len(digits) == 1:
        return f"[0-{digits}]"
    alts = ['"0"']
    if len(digits) > 2:
        alts.append(f"[1-9] [0-9]{{0,{len(digits) - 2}}}")
    elif len(digits) == 2:
        alts.append("[1-9]")
    for i, d in enumerate(digits):
        low = 1 if i == 0 else 0
        high = int(d) - 1
        if high < low:
            continue
        rest = len(digits) - i - 1
        head = literal(digits[:i]) + " " if i else ""
        tail = f" [0-9]{{{rest}}}" if rest else ""
        alts.append(f"{head}[{low}-{high}]{tail}")
    alts.append(literal(digits))
    return "( " + " | ".join(alts) + " )"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


class _Builder:
    """Collects named rules and what llama.cpp will build for them."""

    def __init__(self, limits: GrammarLimits, max_value_chars: int | None) -> None:
        self.limits = limits
        self.max_value_chars = max_value_chars
        self.rules: dict[str, str] = {}
        self.cost = 0
        self._shared: dict[str, str] = {}
        self._names = 0
        self._bounded_upto = 0
        for k in range(len(VALUE_END)):
            self.add(f"b{k}-0", '""')

    def add(self, name: str, body: str, expands_to: int = 0) -> str:
        """Rule `name`; `expands_to` estimates what llama.cpp's repetition expansion adds."""
        self.rules[name] = body
        self.cost += len(name) + len(body) + expands_to
        if self.cost > self.limits.max_cost:
            raise HearthError(
                ErrorCode.INVALID_INPUT,
                f"the tool schemas make a grammar larger than {self.limits.max_cost} bytes",
            )
        return name

    def shared(self, key: str, make: Any) -> str:
        """The rule(s) `make(name)` builds for `key`, built once per grammar."""
        if key not in self._shared:
            self._names += 1
            self._shared[key] = make(f"r{self._names}")
        return self._shared[key]

    def repeat(self, item: str, lo: int, hi: int | None) -> str:
        """`item` lo..hi times (hi None: unbounded), in a rule of its own, so llama.cpp's
        per-rule repetition budget never multiplies; counts beyond `max_repeat` are
        left to the validator. A compound item gets a rule of its own too: llama.cpp
        counts a group's inner rules against the same budget."""
        if " " in item.strip():
            item = self.shared(f"item {item}", lambda name: self.add(name, item))
        cap = self.limits.max_repeat
        lo = min(lo, cap)
        if hi is not None and hi > cap:
            hi = None
        if hi is not None:
            hi = max(hi, lo)
        if hi is None:
            body = f"{item}{{{lo},}}" if lo else f"{item}*"
        elif hi == 0:
            return '""'
        elif lo == hi == 1:
            return item
        else:
            body = f"{item}{{{lo},{hi}}}"
        return self.shared(
            f"rep {item} {lo} {hi}",
            lambda name: self.add(name, body, (lo + (hi or 1)) * (len(item) + 16)),
        )

    def string_lengths(self, schema: dict[str, Any]) -> tuple[int, int | None]:
        """A string's length bounds: its schema's, within the request's limit."""
        lo, hi = _lengths(schema, "minLength", "maxLength")
        if self.max_value_chars is not None:
            hi = max(
                lo, min(hi if hi is not None else lo + self.max_value_chars, self.max_value_chars)
            )
        return lo, hi

    # -- text values (XML parameters) -------------------------------------------------

    def text(self, lo: int, hi: int | None) -> str:
        """Raw text of lo..hi characters without `VALUE_END`: a KMP automaton over it
        (`u<k>`, k characters of `VALUE_END` matched), times a count of what is still
        allowed (`b<k>-<left>`, shared by every bounded value) after a countdown of
        the minimum (`m<id>-<k>-<need>`)."""
        cap = self.limits.max_counted_length
        if hi is not None and lo > hi:
            raise HearthError(ErrorCode.INVALID_INPUT, "minLength is above maxLength")
        if hi is not None and hi > cap:
            hi = None  # the validator checks the maximum
        if lo > cap:
            lo = 0  # and the minimum
        if hi is None:
            self._unbounded()
            tail: Callable[[int], str] = lambda k: f"u{k}"  # noqa: E731
        else:
            left = hi - lo
            self._bounded(left)
            tail = lambda k: f"b{k}-{left}"  # noqa: E731
        if not lo:
            return tail(0)
        return self.shared(f"text {lo} {hi}", lambda name: self._countdown(name, lo, tail))

    def _moves(self) -> list[list[tuple[str, int]]]:
        """(what, next state) from each KMP state over `VALUE_END` (all of it matched
        is no state: a value never holds it)."""
        end = VALUE_END
        moves: list[list[tuple[str, int]]] = [[('"\\n"', 1), (self._other(), 0)]]
        for k in range(1, len(end)):
            moves.append([('"\\n"', 1), (self._other(end[k]), 0)])
            if k + 1 < len(end):
                moves[k].append((literal(end[k]), k + 1))
        return moves

    def _other(self, but: str = "") -> str:
        """A rule for one text character other than a newline (and `but`)."""
        return self.shared(
            f"other {but}", lambda name: self.add(name, char_class("\t", without=but))
        )

    def _state(self, k: int, target: Any, stop_ok: bool) -> str:
        alts = " | ".join(f"{what} {target(k2)}" for what, k2 in self._kmp[k])
        return f'{alts} | ""' if stop_ok else alts

    @functools.cached_property
    def _kmp(self) -> list[list[tuple[str, int]]]:
        return self._moves()

    def _unbounded(self) -> None:
        if "u0" not in self.rules:
            for k in range(len(VALUE_END)):
                self.add(f"u{k}", self._state(k, lambda k2: f"u{k2}", True))

    def _bounded(self, most: int) -> None:
        while self._bounded_upto < most:
            left = self._bounded_upto = self._bounded_upto + 1
            for k in range(len(VALUE_END)):
                target = lambda k2, rest=left - 1: f"b{k2}-{rest}"  # noqa: E731
                body = self._state(k, target, True) if left else '""'
                self.add(f"b{k}-{left}", body)

    def _countdown(self, name: str, lo: int, tail: Callable[[int], str]) -> str:
        for need in range(1, lo + 1):
            for k in range(len(VALUE_END)):
                target = tail if need == 1 else lambda k2, n=need - 1: f"{name}-{k2}-{n}"
                self.add(f"{name}-{k}-{need}", self._state(k, target, False))
        return f"{name}-0-{lo}"

    # -- JSON values -------------------------------------------------------------------

    def json_string(self, schema: dict[str, Any]) -> str:
        lo, hi = self.string_lengths(schema)
        return f'"\\"" {self.repeat("json-char", lo, hi)} "\\""'

    def json(self, schema: Any, depth: int = 0) -> str:
        """A GBNF expression for a JSON value that fits `schema` (as far as GBNF can say)."""
        if schema is True or schema == {}:
            return "json-value"
        if not isinstance(schema, dict):
            raise HearthError(ErrorCode.INVALID_INPUT, "a value's schema is `false`")
        if depth > self.limits.max_schema_depth:
            return "json-value"
        key = json.dumps(schema, sort_keys=True, default=str)
        return self.shared(f"json {key}", lambda name: self._json_rule(name, schema, depth))

    def _json_rule(self, name: str, schema: dict[str, Any], depth: int) -> str:
        return self.add(name, self._json_expr(schema, depth))

    def _json_expr(self, schema: dict[str, Any], depth: int) -> str:
        choices = _choices(schema, self.limits)
        if choices is not None:
            return _alternatives(
                [literal(json.dumps(v, ensure_ascii=False, separators=(",", ":"))) for v in choices]
            )
        branches = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(branches, list) and branches:
            if len(branches) > self.limits.max_alternatives:
                raise HearthError(ErrorCode.INVALID_INPUT, "too many anyOf/oneOf branches")
            return _alternatives([self.json(b, depth + 1) for b in branches])
        kinds = schema_kinds(schema)
        if not kinds:
            return "json-value"
        return _alternatives([self._json_kind(k, schema, depth) for k in sorted(kinds)])

    def _json_kind(self, kind: str, schema: dict[str, Any], depth: int) -> str:
        if kind == "string":
            return self.json_string(schema)
        if kind == "integer":
            return _integer(schema)
        if kind == "number":
            return "json-number"
        if kind == "boolean":
            return "json-bool"
        if kind == "null":
            return '"null"'
        if kind == "array":
            return self._array(schema, depth)
        if kind == "object":
            return self._object(schema, depth)
        return "json-value"

    def _array(self, schema: dict[str, Any], depth: int) -> str:
        items = schema.get("items", True)
        item = self.json(items if isinstance(items, dict | bool) else True, depth + 1)
        if "prefixItems" in schema:
            item = "json-value"
        lo, hi = _lengths(schema, "minItems", "maxItems")
        if hi == 0:
            return '"[" "]"'
        more = self.repeat(f"json-comma {item}", max(lo - 1, 0), None if hi is None else hi - 1)
        body = f"{item} {more}"
        return f'"[" {body} "]"' if lo else f'"[" ( {body} )? "]"'

    def _object(self, schema: dict[str, Any], depth: int) -> str:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        fields = [(k, v) for k, v in properties.items() if v is not False]
        fields += [(r, True) for r in required if r not in properties]
        if not fields:
            closed = schema.get("additionalProperties") is False
            return '"{" "}"' if closed else "json-object"
        pairs = [(f"{_key(k)} json-colon {self.json(v, depth + 1)}", k) for k, v in fields]
        self._names += 1
        base = f"o{self._names}"
        # first-i: members from i on, none written yet; rest-i: some written (comma first)
        n = len(pairs)
        self.add(f"{base}-rest-{n}", '""')
        self.add(f"{base}-first-{n}", '""')
        for i in range(n - 1, -1, -1):
            member, key = pairs[i]
            must = key in required
            rest = f"json-comma {member} {base}-rest-{i + 1}"
            self.add(f"{base}-rest-{i}", rest if must else f"( {rest} )? {base}-rest-{i + 1}")
            first = f"{member} {base}-rest-{i + 1}"
            self.add(f"{base}-first-{i}", first if must else f"{first} | {base}-first-{i + 1}")
        return f'"{{" {base}-first-0 "}}"'

    # -- XML parameter values ------------------------------------------------------------

    def xml_value(self, schema: Any) -> str:
        """A parameter's value as the XML form writes it: raw text for strings, compact
        JSON for the rest, either for a union that includes strings."""
        if not isinstance(schema, dict) or schema == {}:
            return self.text(0, None) if schema is not False else '""'
        choices = _choices(schema, self.limits)
        if choices is not None:
            return _alternatives(
                [
                    literal(v)
                    if isinstance(v, str)
                    else literal(json.dumps(v, ensure_ascii=False, separators=(",", ":")))
                    for v in choices
                    if not (isinstance(v, str) and VALUE_END in v)
                ]
                or _unusable()
            )
        kinds = schema_kinds(schema)
        if "string" not in kinds and kinds:
            return self.json(schema)
        lo, hi = self.string_lengths(schema)
        text = self.text(lo, hi)
        others = kinds - {"string"}
        if not others:
            return text
        return _alternatives([self.json({**schema, "type": sorted(others)}), text])


def _key(name: str) -> str:
    return literal(json.dumps(name, ensure_ascii=False))


def _unusable() -> list[str]:
    raise HearthError(ErrorCode.INVALID_INPUT, "no enum value can be written as a tool argument")


def _alternatives(options: list[str]) -> str:
    unique = list(dict.fromkeys(options))
    return unique[0] if len(unique) == 1 else "( " + " | ".join(unique) + " )"


def _usable(value: Any) -> bool:
    """A value the validator can accept (no control character, no lone surrogate)."""
    if isinstance(value, str):
        return not any(
            (ord(c) < 0x20 and c not in "\n\t")
            or 0x7F <= ord(c) <= 0x9F
            or 0xD800 <= ord(c) < 0xE000
            for c in value
        )
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return abs(value) <= MAX_SAFE_INTEGER
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_usable(v) for v in value)
    if isinstance(value, dict):
        return all(_usable(k) and _usable(v) for k, v in value.items())
    return False


def _choices(schema: dict[str, Any], limits: GrammarLimits) -> list[Any] | None:
    """The values an `enum`/`const` allows, without those the validator would refuse."""
    if "const" in schema:
        values = [schema["const"]]
    elif isinstance(schema.get("enum"), list):
        values = schema["enum"]
    else:
        return None
    if len(values) > limits.max_alternatives:
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"an enum has more than {limits.max_alternatives} values"
        )
    usable = [v for v in values if _usable(v)]
    if not usable:
        _unusable()
    return usable


def _lengths(schema: dict[str, Any], low: str, high: str) -> tuple[int, int | None]:
    lo, hi = _number(schema.get(low)), _number(schema.get(high))
    lo_int = max(0, math.ceil(lo)) if lo is not None else 0
    hi_int = max(0, math.floor(hi)) if hi is not None else None
    if hi_int is not None and lo_int > hi_int:
        raise HearthError(ErrorCode.INVALID_INPUT, f"{low} is above {high}")
    return lo_int, hi_int


def _integer(schema: dict[str, Any]) -> str:
    low, high = _number(schema.get("minimum")), _number(schema.get("maximum"))
    bound = MAX_SAFE_INTEGER
    if low is not None and high is not None:
        bound = min(bound, int(max(abs(low), abs(high))))
    sign = '"-"? ' if low is None or low < 0 else ""
    return f"{sign}{_uint_at_most(bound)}"


GRAMMARS_KEPT = 64  # tool grammars kept, by their tools' digest and settings
_grammars: ByDigest[ToolGrammar] = ByDigest(GRAMMARS_KEPT)


def tool_grammar(
    tools: dict[str, dict[str, Any]],
    mode: Mode = "auto",
    max_calls: int = 4,
    limits: GrammarLimits = DEFAULT_LIMITS.grammar,
    max_value_chars: int | None = None,
    call_format: CallFormat = QWEN_XML,
) -> ToolGrammar | None:
    """The grammar for one round: lazy (`auto`), calls only (`required`), or none (`none`,
    or no tools: prose is free), in the model's `call_format`. `max_value_chars` (a
    request's limit) caps string values beyond their schemas. Raises `invalid_input` for
    schemas beyond `limits`. Built once for the same tools and settings (they come with
    every request)."""
    if mode == "none" or not tools:
        return None
    if call_format.max_calls is not None:
        max_calls = min(max_calls, call_format.max_calls)
    settings = (mode, max_calls, limits, max_value_chars, call_format.name)
    if call_format.json_body:
        return _grammars.get(
            tools,
            settings,
            lambda: _json_tool_grammar(
                tools, mode, max_calls, limits, max_value_chars, call_format
            ),
        )
    return _grammars.get(
        tools, settings, lambda: _tool_grammar(tools, mode, max_calls, limits, max_value_chars)
    )


def _within(
    tools: dict[str, dict[str, Any]], limits: GrammarLimits
) -> list[tuple[str, dict[str, Any]]]:
    """The tools as (name, schema), once their number and each schema's size are within
    `limits` (`invalid_input` otherwise)."""
    if len(tools) > limits.max_tools:
        raise HearthError(ErrorCode.INVALID_INPUT, f"more than {limits.max_tools} tools")
    for name, schema in tools.items():
        if len(json.dumps(schema, default=str)) > limits.max_schema_bytes:
            raise HearthError(ErrorCode.INVALID_INPUT, f"tool {name}: schema too large")
    return list(tools.items())


def _json_tool_grammar(
    tools: dict[str, dict[str, Any]],
    mode: Mode,
    max_calls: int,
    limits: GrammarLimits,
    max_value_chars: int | None,
    call_format: CallFormat,
) -> ToolGrammar:
    """Calls whose body is one JSON object, `{"name": NAME, "<arguments key>": {…}}`
    (Hermes inside `<tool_call>` tags, Llama 3.x bare), arguments typed by the schema."""
    b = _Builder(limits, max_value_chars)
    alternatives = []
    for i, (name, schema) in enumerate(_within(tools, limits)):
        arguments = dict(schema) if isinstance(schema, dict) else {}
        arguments.setdefault("type", "object")
        body = b.json(arguments)
        head = f'{json.dumps(name, ensure_ascii=False)}, "{call_format.arguments_key}": '
        alternatives.append(b.add(f"t{i}", f"{literal(head)} {body}"))
    tagged = bool(call_format.close)  # Hermes: the object inside <tool_call> tags
    opening = (call_format.open + "\n" if tagged else "") + '{"name": '
    closing = "}" + ("\n" + call_format.close if tagged else "")
    names = " | ".join(alternatives)
    call = b.add("call", f"{literal(opening)} ( {names} ) {literal(closing)}")
    more = b.repeat(f'"\\n" {call}', 0, max(0, max_calls - 1))
    return ToolGrammar(
        _text(f"{call} {more}", b),
        lazy=mode == "auto",
        trigger=call_format.open,
        anchored=not tagged,
    )


def _tool_grammar(
    tools: dict[str, dict[str, Any]],
    mode: Mode,
    max_calls: int,
    limits: GrammarLimits,
    max_value_chars: int | None,
) -> ToolGrammar:
    b = _Builder(limits, max_value_chars)
    alternatives = []
    for i, (name, schema) in enumerate(_within(tools, limits)):
        properties = schema.get("properties") if isinstance(schema, dict) else None
        properties = properties if isinstance(properties, dict) else {}
        named = schema.get("required", []) if isinstance(schema, dict) else []
        required = {r for r in named if isinstance(r, str)}
        # a required name without a property schema takes any value, after the properties
        unlisted = [(r, True) for r in dict.fromkeys(named) if r in required - properties.keys()]
        parts = [literal(f"{name}>\n")]
        for j, (prop, prop_schema) in enumerate([*properties.items(), *unlisted]):
            if prop_schema is False or not _usable(prop) or ">" in prop or "\n" in prop:
                if prop in required:
                    raise HearthError(
                        ErrorCode.INVALID_INPUT,
                        f"tool {name}: parameter {prop!r} cannot be written",
                    )
                continue
            value = b.xml_value(prop_schema)
            rule = b.add(
                f"t{i}-p{j}",
                f"{literal(f'<parameter={prop}>' + chr(10))} {value} "
                f"{literal(VALUE_END + chr(10))}",
            )
            parts.append(rule if prop in required else f"{rule}?")
        alternatives.append(b.add(f"t{i}", " ".join(parts)))
    call = b.add(
        "call",
        f"{literal(CALL_OPEN + chr(10) + '<function=')} ( {' | '.join(alternatives)} ) "
        f"{literal('</function>' + chr(10) + '</tool_call>')}",
    )
    more = b.repeat(f'"\\n" {call}', 0, max(0, max_calls - 1))
    return ToolGrammar(_text(f"{call} {more}", b), lazy=mode == "auto")


class AnswerGrammar(ToolGrammar):
    """A grammar for an answer that is JSON (no tool call), with the `schema` it encodes
    (for a server that takes a JSON schema rather than a grammar)."""

    schema: dict[str, Any]

    def __new__(cls, text: str, schema: dict[str, Any]) -> Self:
        grammar = super().__new__(cls, text)
        grammar.schema = schema
        return grammar


def json_grammar(
    schema: dict[str, Any] | None, limits: GrammarLimits = DEFAULT_LIMITS.grammar
) -> AnswerGrammar:
    """The grammar for an answer that is one JSON value fitting `schema` (None: any
    object), as compact JSON after optional leading whitespace; `invalid_input` for a
    schema beyond `limits`. What GBNF cannot say (patterns, bounds) the caller checks."""
    schema = {"type": "object"} if schema is None else schema
    if len(json.dumps(schema, default=str)) > limits.max_schema_bytes:
        raise HearthError(ErrorCode.INVALID_INPUT, "the response schema is too large")
    b = _Builder(limits, None)
    value = b.json(schema)
    return AnswerGrammar(_text(f"[ \\n]? {value}", b), schema)


def _text(root: str, b: _Builder) -> str:
    """The grammar's text: `root`, the rules `b` built, and the shared JSON rules."""
    rules = [f"root ::= {root}"] + [f"{k} ::= {v}" for k, v in b.rules.items()]
    rules.append(f"json-uint ::= {_uint_at_most(MAX_SAFE_INTEGER)}")
    json_rules = _JSON_RULES.replace("JSON_CHAR", char_class(without='"\\'))
    return "\n".join(rules) + "\n" + json_rules


def answer_grammar(settings: AnswerSettings | None) -> AnswerGrammar | None:
    """The grammar for a round that calls no tool: the app's JSON answer, when asked."""
    if settings is None or not settings.json_answer:
        return None
    return json_grammar(settings.json_schema)
