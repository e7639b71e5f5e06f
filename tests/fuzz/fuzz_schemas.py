"""Fuzz target: arbitrary tool schemas → check_schemas → grammar → llama.cpp.

Run as its own process (a crash kills only it), under an address-space limit:

    python tests/fuzz/fuzz_schemas.py MODEL.gguf --count 2000 [--seed 0] [--max-mb 3072]
    python tests/fuzz/fuzz_schemas.py MODEL.gguf --schema '{"type": "object", ...}'

Schemas come from hypothesis strategies weighted toward what broke things before:
huge or inverted length bounds, control and non-BMP characters in enums and names,
catastrophic or non-RE2 patterns, deep nesting, unions. Each one must end as a
grammar llama.cpp parses, or as `invalid_input`, within a time bound; every 20th is
also sampled from for a few tokens with the tiny model. Prints one JSON line:
`{"schemas", "compiled", "refused", "sampled", "exec_per_s", "max_s"}`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.runtime import LlamaRuntime, SessionMemory
from hearth.protocol.model.sampling import compile_grammar
from hearth.protocol.model.toolcalls import ModelOutputError
from hearth.protocol.model.validate import check_schemas
from hearth.protocol.wire.errors import ErrorCode, HearthError

SLOW_S = 10.0  # one schema's grammar, built and parsed
SAMPLE_EVERY = 20

_edge_ints = st.sampled_from(
    [
        0,
        1,
        2,
        119,
        120,
        121,
        300,
        999,
        1000,
        1001,
        1200,
        2000,
        2001,
        2500,
        4096,
        4097,
        10000,
        10**6,
        2**31,
        2**53 + 1,
    ]
)
_counts = st.one_of(_edge_ints, st.integers(0, 5000))
_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    [
        "\f",
        "\b",
        "a\x00b",
        "\x85",
        "\u2028",
        "😀",
        "\U0010ffff",
        "</parameter>",
        "\n</parameter>\n",
        '"',
        "\\",
        "]",
        "{m,n}",
        "<tool_call>",
        "a" * 30 + "!",
    ]
)
_patterns = st.sampled_from(
    ["^(a+)+$", "(a)\\1", "(?=a)", "^[a-z]+$", "a{1000}{1000}", "[", "\\d+", "x*"]
)
_numbers = st.one_of(st.integers(-(2**60), 2**60), st.floats(allow_nan=False, allow_infinity=False))
_json = st.recursive(
    st.none() | st.booleans() | _numbers | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)


def _maybe(key: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), values.map(lambda v: {key: v}))


def _merge(*parts: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(*parts).map(lambda ds: {k: v for d in ds for k, v in d.items()})


_string = _merge(
    st.just({"type": "string"}),
    _maybe("minLength", _counts),
    _maybe("maxLength", _counts),
    _maybe("pattern", _patterns),
    _maybe("enum", st.lists(_text, min_size=1, max_size=4)),
)
_integer = _merge(
    st.just({"type": "integer"}),
    _maybe("minimum", _numbers),
    _maybe("maximum", _numbers),
)
_leaf = st.one_of(
    _string,
    _integer,
    st.sampled_from([{"type": "number"}, {"type": "boolean"}, {"type": "null"}, {}, True]),
    st.lists(_json, min_size=1, max_size=4).map(lambda v: {"enum": v}),
    _json.map(lambda v: {"const": v}),
    st.lists(
        st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object"]),
        min_size=1,
        max_size=3,
        unique=True,
    ).map(lambda t: {"type": t}),
)


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        _merge(
            st.just({"type": "object"}),
            _maybe("properties", st.dictionaries(_text, inner, max_size=4)),
            _maybe("required", st.lists(_text, max_size=3, unique=True)),
            _maybe("additionalProperties", st.booleans()),
        ),
        _merge(
            st.just({"type": "array"}),
            _maybe("items", inner),
            _maybe("minItems", _counts),
            _maybe("maxItems", _counts),
        ),
        st.lists(inner, min_size=1, max_size=3).map(lambda b: {"anyOf": b}),
    )


_values = st.recursive(_leaf, _extend, max_leaves=10)
_tools = st.dictionaries(
    st.from_regex(r"[A-Za-z0-9_.-]{1,16}", fullmatch=True),
    _merge(
        st.just({"type": "object"}),
        st.dictionaries(_text, _values, max_size=5).map(lambda p: {"properties": p}),
        _maybe("required", st.lists(_text, max_size=3, unique=True)),
    ),
    min_size=1,
    max_size=3,
)


class Run:
    def __init__(self, model: Path) -> None:
        self.runtime = LlamaRuntime(model, n_ctx=1024)
        self.lib = self.runtime._lib
        self.stats = {"schemas": 0, "compiled": 0, "refused": 0, "sampled": 0, "max_s": 0.0}

    def one(self, tools: dict[str, Any], sample: bool = False) -> None:
        """One tool set: refused with `invalid_input`, or a grammar llama.cpp parses."""
        json.dumps(tools)  # what a phone could send
        self.stats["schemas"] += 1
        started = time.monotonic()
        try:
            check_schemas(tools)
            mode = "required" if self.stats["schemas"] % 2 else "auto"
            grammar = tool_grammar(tools, mode, max_calls=3)
            assert grammar is not None
            try:
                sampler = compile_grammar(self.lib, self.runtime._vocab, grammar, self.runtime.llm)
            except HearthError as exc:  # a grammar built from a schema must parse
                raise AssertionError(f"llama.cpp refused the grammar of {tools!r}") from exc
            self.lib.llama_sampler_free(sampler)
        except HearthError as exc:
            assert exc.code == ErrorCode.INVALID_INPUT, exc
            self.stats["refused"] += 1
            return
        finally:
            took = time.monotonic() - started
            self.stats["max_s"] = max(self.stats["max_s"], round(took, 3))
            assert took < SLOW_S, f"{took:.1f} s for {tools!r}"[:2000]
        self.stats["compiled"] += 1
        if sample or self.stats["compiled"] % SAMPLE_EVERY == 0:
            self.stats["sampled"] += 1
            with contextlib.suppress(ModelOutputError):  # typed: no token can continue
                self.runtime.generate(
                    SessionMemory(), "<|im_start|>assistant\n", grammar=grammar, max_tokens=24
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-mb", type=int, default=3072)
    parser.add_argument("--schema", help="one tool's parameters schema (JSON) instead")
    args = parser.parse_args()
    limit = args.max_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    run = Run(args.model)
    started = time.monotonic()
    if args.schema:
        run.one({"tool": json.loads(args.schema)}, sample=True)
    else:

        @settings(
            max_examples=args.count,
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(_tools)
        def fuzz(tools: dict[str, Any]) -> None:
            run.one(tools)

        fuzz._hypothesis_internal_use_seed = args.seed  # type: ignore[attr-defined]
        fuzz()
    elapsed = time.monotonic() - started
    print(json.dumps({**run.stats, "exec_per_s": round(run.stats["schemas"] / elapsed, 1)}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
