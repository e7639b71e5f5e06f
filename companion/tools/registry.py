"""The tool registry: the phone's own manifest, never taken from a planner.

A tool is a typed Python function registered with a decorator. Its JSON schema
(OpenAI function format) comes from the type hints through pydantic; it carries a
tier, MCP-style annotations, which arguments are control arguments (recipient,
URL, path, amount), and whether its results are private. A tool that may overwrite
or delete existing data says so with `overwrites`: when those arguments would,
the step is irreversible (no previous version is kept to undo it).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from hearth.protocol.model.limits import DEFAULT_LIMITS
from hearth.protocol.model.validate import validator, within
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ToolSpec

from .selection import Selection, select, tool_text

BUILTIN = "builtin"  # the source of the phone's own tools


class Tier(StrEnum):
    """How much a tool may do, from harmless to irreversible."""

    READ_ONLY = "read-only"  # runs
    OPEN_WORLD_READ = "open-world-read"  # runs; may not carry private values out
    REVERSIBLE = "reversible-write"  # one approval per plan
    IRREVERSIBLE = "irreversible"  # send, call, pay, delete: confirmation per step


@dataclass(frozen=True)
class Annotations:
    """MCP-style hints (unannotated MCP tools get the MCP defaults: destructive, open-world)."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    def as_dict(self) -> dict[str, bool]:
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


@dataclass(frozen=True)
class ToolContext:
    """What a running tool gets besides its arguments."""

    idempotency_key: str  # "plan_id:step_id": built-in tools deduplicate on it


Handler = Callable[..., Awaitable[Any]]


@dataclass
class Tool:
    """One entry of the manifest."""

    name: str
    description: str
    handler: Handler
    tier: Tier
    annotations: Annotations
    control_args: frozenset[str]
    private: bool
    args_model: type[BaseModel] | None = None  # built-in tools; else `schema` is given
    source: str = BUILTIN
    untrusted_results: bool = False
    schema: dict[str, Any] = field(default_factory=dict)
    overwrites: Callable[[dict[str, Any]], bool] | None = None  # validated arguments
    key_fields: frozenset[str] = frozenset()
    """Fields of its results' entries that name an object of the owner's data (an event's
    id): selected by trusted criteria, such a field is trusted (see the executor)."""

    def __post_init__(self) -> None:
        if self.args_model is not None:
            self.schema = self.args_model.model_json_schema()
        self.schema.pop("title", None)
        for prop in self.schema.get("properties", {}).values():
            if isinstance(prop, dict):  # `true` (any value) is a schema too
                prop.pop("title", None)

    @property
    def sensitive(self) -> bool:
        return self.tier in (Tier.REVERSIBLE, Tier.IRREVERSIBLE) or self.annotations.open_world

    def tier_for(self, arguments: dict[str, Any]) -> Tier:
        """The tier of this call: irreversible where it would overwrite existing data."""
        if self.overwrites is not None and self.overwrites(arguments):
            return Tier.IRREVERSIBLE
        return self.tier

    def spec(self) -> ToolSpec:
        return ToolSpec.model_validate(
            {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": self.schema,
                },
            }
        )

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments checked against the local schema; `plan_rejected` otherwise. The
        message names the argument and the rule, never the value (it may be private).
        A server's schema is checked with RE2 patterns and local `$ref`s only, within
        the validation deadline (`timed_out`)."""
        if self.args_model is None:
            try:
                with within(DEFAULT_LIMITS.validation.deadline_s):
                    error = next(iter(validator(self.schema).iter_errors(arguments)), None)
            except HearthError as exc:
                raise HearthError(exc.code, f"{self.name}: {exc.message}") from exc
            except Exception as exc:  # a server's schema that cannot be evaluated (say, a
                # `$ref` nobody can resolve) refuses the step rather than ending the ask
                raise HearthError(
                    ErrorCode.PLAN_REJECTED, f"{self.name}: its schema cannot be checked"
                ) from exc
            if error is not None:
                where = str(error.path[0]) if error.path else "arguments"
                rule = f"{error.validator}={json.dumps(error.validator_value)}"
                raise HearthError(
                    ErrorCode.PLAN_REJECTED, f"{self.name}: {where}: does not satisfy {rule[:120]}"
                )
            return arguments
        try:  # as JSON: the journal keeps it, the wire carries it
            return self.args_model.model_validate(arguments).model_dump(mode="json")
        except ValidationError as exc:
            err = exc.errors()[0]
            where = str(err["loc"][0]) if err["loc"] else "arguments"
            raise HearthError(
                ErrorCode.PLAN_REJECTED, f"{self.name}: {where}: {err['msg']}"
            ) from exc

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        return await self.handler(ctx, **arguments)


def args_model_of(fn: Callable[..., Any], name: str, *, takes_ctx: bool = True) -> type[BaseModel]:
    """A pydantic model of `fn`'s parameters (after the leading `ctx` if it `takes_ctx`)."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for param in list(inspect.signature(fn).parameters.values())[takes_ctx:]:
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default)
    return create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)


class Registry:
    """The manifest: tools by name."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}

    def tool(
        self,
        *,
        tier: Tier,
        annotations: Annotations,
        control: tuple[str, ...] = (),
        private: bool = False,
        untrusted_results: bool = False,
        overwrites: Callable[[dict[str, Any]], bool] | None = None,
        keys: tuple[str, ...] = (),
    ) -> Callable[[Handler], Handler]:
        """Register an async function `(ctx, **args)` as a tool; its docstring describes it."""

        def register(fn: Handler) -> Handler:
            name = fn.__name__
            self.add(
                Tool(
                    name=name,
                    description=inspect.getdoc(fn) or "",
                    handler=fn,
                    tier=tier,
                    annotations=annotations,
                    control_args=frozenset(control),
                    private=private,
                    args_model=args_model_of(fn, name),
                    untrusted_results=untrusted_results,
                    overwrites=overwrites,
                    key_fields=frozenset(keys),
                )
            )
            return fn

        return register

    def add(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise HearthError(ErrorCode.INVALID_INPUT, f"two tools named {tool.name}")
        self.tools[tool.name] = tool

    def get(self, name: str) -> Tool:
        try:
            return self.tools[name]
        except KeyError as exc:
            raise HearthError(ErrorCode.PLAN_REJECTED, f"no tool {name!r} on this phone") from exc

    def specs(self, names: set[str] | None = None) -> list[ToolSpec]:
        return [t.spec() for n, t in self.tools.items() if names is None or n in names]

    def candidates(self, text: str, among: set[str] | None = None, shown: str = "") -> Selection:
        """The tools (of `among`, default all) a request may need, given what the task
        has `shown` so far; all of them when its text points to none (see `selection`)."""
        return select(
            text,
            {
                n: tool_text(n, t.description, t.schema)
                for n, t in self.tools.items()
                if among is None or n in among
            },
            shown=shown,
        )

    def manifest(self) -> list[dict[str, Any]]:
        """What `hearth tools --json` prints."""
        return [
            {
                "name": t.name,
                "tier": t.tier.value,
                "annotations": t.annotations.as_dict(),
                "control_args": sorted(t.control_args),
                "private": t.private,
                "key_fields": sorted(t.key_fields),
                "source": t.source,
                "schema": t.schema,
            }
            for t in self.tools.values()
        ]
