"""The model layer's settings, in one place: what a schema may cost as a grammar,
how long validating a call may take, and how tokens are sampled.

Every bound here protects a process from a hostile or careless tool schema; none of
them limits what a real model may write (answers are bounded by the request's
token limit, values by their schemas).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.wire.messages import AnswerSettings


class GrammarLimits(BaseModel):
    """How big a grammar built from tool schemas may get (checked before llama.cpp
    sees it; past a bound the request is `invalid_input`).

    llama.cpp expands `x{m,n}` into m copies of x plus n - m nested rules and refuses
    counts above 2,000 (and, with m > n, loops until memory runs out): every count
    written here stays at or below `max_repeat`, with m <= n.
    """

    model_config = ConfigDict(frozen=True)

    max_repeat: Annotated[int, Field(ge=1, le=2000)] = 1000
    """Largest m or n of one `{m,n}`; a longer `maxLength`/`maxItems` is left to the
    validator (the grammar then repeats without a count)."""
    max_counted_length: Annotated[int, Field(ge=0, le=100_000)] = 4096
    """Largest `maxLength`/`minLength` of a tool-call text value the grammar counts
    exactly (13 rules a character: the value must not close its own tag); past it the
    validator checks the length."""
    max_cost: Annotated[int, Field(ge=1)] = 4_000_000
    """Bytes of grammar text for one request, counting what llama.cpp's repetition
    expansion adds (its memory stays within a small multiple of this)."""
    max_schema_depth: Annotated[int, Field(ge=1, le=64)] = 24
    max_schema_bytes: Annotated[int, Field(ge=1)] = 256 * 1024
    """A tool's schema as compact JSON."""
    max_tools: Annotated[int, Field(ge=1)] = 512
    max_alternatives: Annotated[int, Field(ge=1)] = 2048
    """`enum` values plus `anyOf`/`oneOf` branches of one value."""


class ValidationLimits(BaseModel):
    """Checking a model's call against its schema: off the event loop, within a deadline."""

    model_config = ConfigDict(frozen=True)

    deadline_s: Annotated[float, Field(gt=0, le=60)] = 5.0
    max_pattern_bytes: Annotated[int, Field(ge=1)] = 4096
    """One `pattern`/`patternProperties` regular expression (RE2 syntax, linear time)."""
    max_pattern_memory: Annotated[int, Field(ge=1 << 16, le=64 << 20)] = 2 << 20
    """RE2's memory for one compiled pattern (its `max_mem`): a bigger one is refused.
    Compiling takes time in proportion (`\\pL{446}`, 8 bytes, took 4 MiB and a second
    at RE2's default of 8 MiB)."""
    max_pattern_program: Annotated[int, Field(ge=1)] = 1_000_000
    """RE2 instructions the patterns of one request's tools may compile to in all
    (a microsecond or two each to compile, on the caller's thread)."""
    max_value_depth: Annotated[int, Field(ge=1, le=200)] = 64
    """Nesting of one argument's value (the grammar's JSON has no depth bound; what
    handles a value later recurses over it)."""
    reading_s: Annotated[float, Field(gt=0, le=1)] = 0.05
    """Checking whether an XML value of a union with strings reads as JSON (parsing,
    on the caller's thread); undecided in time, it reads as JSON."""
    readings_s: Annotated[float, Field(gt=0, le=5)] = 0.2
    """All such checks of one model output together (the node parses on its event
    loop; a schema may make every parameter one): past it, the rest are undecided."""
    max_expanded_nodes: Annotated[int, Field(ge=1)] = 100_000
    """Schema nodes one tool's schema may expand to with every `$ref` followed (a
    `$ref` into its own expansion counted once): `$ref`s that fan out exponentially
    are refused, not validated for hours."""


class ModelLimits(BaseModel):
    """All of the model layer's bounds (configuration may override any field)."""

    model_config = ConfigDict(frozen=True)

    grammar: GrammarLimits = GrammarLimits()
    validation: ValidationLimits = ValidationLimits()


DEFAULT_LIMITS = ModelLimits()


# GGUF keys a model's card may carry for its recommended sampling (llama.cpp names)
_GGUF_KEYS = {
    "temperature": "general.sampling.temp",
    "top_k": "general.sampling.top_k",
    "top_p": "general.sampling.top_p",
    "min_p": "general.sampling.min_p",
    "repeat_penalty": "general.sampling.penalty_repeat",
    "repeat_last_n": "general.sampling.penalty_last_n",
}


class Sampling(BaseModel):
    """Sampling settings (greedy by default, so plans are reproducible)."""

    model_config = ConfigDict(frozen=True)

    temperature: Annotated[float, Field(ge=0, le=5)] = 0.0
    top_k: Annotated[int, Field(ge=0)] = 40
    top_p: Annotated[float, Field(gt=0, le=1)] = 0.95
    min_p: Annotated[float, Field(ge=0, le=1)] = 0.05
    repeat_penalty: Annotated[float, Field(gt=0, le=5)] = 1.0
    repeat_last_n: Annotated[int, Field(ge=0)] = 64
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] = 0.0  # OpenAI's, per occurrence
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] = 0.0  # OpenAI's, once a token is seen
    seed: Annotated[int, Field(ge=0, lt=2**32)] = 0
    stop: tuple[str, ...] = ()  # the answer ends before the first of these (not included)

    @property
    def neutral_penalties(self) -> bool:
        """No penalty changes any token's logit (greedy is then the plain argmax)."""
        return self.repeat_penalty == 1 and self.frequency_penalty == self.presence_penalty == 0

    @classmethod
    def from_gguf(cls, metadata: Mapping[str, str], **overrides: Any) -> Sampling:
        """The model's own recommended settings where its GGUF carries them, then
        `overrides` (configuration) on top."""
        found: dict[str, Any] = {}
        for field, key in _GGUF_KEYS.items():
            if key in metadata:
                try:
                    found[field] = float(metadata[key])
                except ValueError:
                    continue
        for field in ("top_k", "repeat_last_n"):
            if field in found:
                found[field] = int(found[field])
        return cls.model_validate({**found, **overrides})


def requested(base: Sampling, settings: AnswerSettings | None) -> Sampling:
    """`base` (the configuration's or the model's own) with what an app asked for on top."""
    if settings is None:
        return base
    asked = settings.model_dump(
        include={"temperature", "top_p", "seed", "frequency_penalty", "presence_penalty"},
        exclude_none=True,
    )
    if settings.stop:
        asked["stop"] = tuple(settings.stop)
    return base.model_copy(update=asked)


def answer_tokens(limit: int, settings: AnswerSettings | None) -> int:
    """The tokens an answer may take: what the app asked for, within `limit`."""
    asked = settings.max_tokens if settings is not None else None
    return min(asked or limit, limit)
