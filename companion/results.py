"""Typed results of the companion's operations.

Each model's `model_dump(mode="json")` is the `--json` object of the matching
command (DESIGN "Command line"): the CLI, the companion socket, the HTTP API and
the Python API all hand out these, never hand-built dicts. Kept free of heavy
imports: the thin client loads this module on every command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from hearth.protocol.model.toolcalls import json_depth

if TYPE_CHECKING:
    from hearth.protocol.wire.messages import Usage

StepStatus = Literal["ok", "error", "refused", "skipped", "timed_out"]
MAX_DEPTH = 64
"""Nesting of a value the phone decodes, resolves, keeps or shows (a plan's argument, a
step's result): deeper, it is refused or cut (a serialiser, `json` and pydantic alike,
stops at a depth of its own, and a reply that cannot be written hides what was done)."""
DEEPER = f"…(nested deeper than {MAX_DEPTH} levels)"


def nesting(value: Any, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of a JSON value, counted no further than past `limit`."""
    return json_depth(value, limit)


def bounded(value: Any, limit: int = MAX_DEPTH) -> Any:
    """`value` with what is nested deeper than `limit` levels replaced by `DEEPER`."""
    if nesting(value, limit) <= limit:
        return value
    if limit <= 1 or not isinstance(value, dict | list | tuple):
        return DEEPER
    if isinstance(value, dict):
        return {k: bounded(v, limit - 1) for k, v in value.items()}
    return [bounded(v, limit - 1) for v in value]


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepView(Result):
    """One step of one plan, with its own round's observation."""

    id: str
    round: int
    tool: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    status: StepStatus
    result: JsonValue = None
    error: str | None = None  # every step that is not ok says why

    @field_validator("arguments", "result", mode="before")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        """Shown as deep as a reply can be written (a plan may nest an argument deeper:
        its step is refused, and the reply still says so)."""
        return bounded(value, MAX_DEPTH + 1) if isinstance(value, dict) else bounded(value)


class PlanView(Result):
    plan_id: str
    signer: str
    round: int
    steps: list[StepView] = Field(default_factory=list)


class WarningView(Result):
    """An MCP server left out of this run, one of its tools refused, or tools left out of
    this request to fit its planner's context (`source` "planner", `code`
    "tools_left_out"), and why."""

    source: str
    tool: str | None = None
    code: str
    message: str


class DocumentView(Result):
    """An attached document and how much of it left the phone (issue 20)."""

    name: str
    pages: int = 0
    chunks: int = 0
    sent: bool = False


class UsageView(Result):
    """Tokens an answer cost, as OpenAI's `usage` has them (counted by the runtime that
    generated: the phone's llama.cpp, the node's backend or its upstream)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def of(cls, usage: Usage) -> UsageView:
        return cls(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
        )


class AskResult(Result):
    """`hearth ask --json`. `thinking` and `confidence` appear only when present."""

    request_id: str
    route: Literal["local", "remote"] = "local"
    escalated: bool = False
    reason: str = ""
    node: str | None = None
    planner: str | None = None  # the peer that planned (home or friend); the phone: its own id
    plans: list[PlanView] = Field(default_factory=list)
    plan: PlanView | None = None  # the last plan
    answer: str = ""
    timings: dict[str, float] = Field(default_factory=dict)
    conversation_id: str | None = None
    deferred: bool = False  # the request waits for the home node (issue 20)
    served_by: Literal["companion", "process"] = "process"
    documents: list[DocumentView] = Field(default_factory=list)
    warnings: list[WarningView] = Field(default_factory=list)
    thinking: str | None = None
    confidence: float | None = None
    untrusted_sources: list[str] = Field(default_factory=list)
    """The untrusted input the planner read before it wrote the answer (web results, files,
    messages, MCP results, a friend's plans): the answer may repeat what they said."""
    usage: UsageView = Field(default_factory=UsageView)
    finish: Literal["stop", "length"] = "stop"  # "length": the token limit cut the answer

    @model_serializer(mode="wrap")
    def _optional_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("thinking", "confidence"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


class NodeStatus(Result):
    peer_id: str
    name: str = ""
    roles: list[str] = Field(default_factory=list)  # "home" for the home node, "planner"
    relay: str | None = None  # reachable through this relay (its name); None: directly
    reachable: bool = False
    reason: str = ""
    latency_ms: float | None = None
    model: dict[str, JsonValue] | None = None


class StatusResult(Result):
    """`hearth status --json`."""

    peer_id: str
    nodes: list[NodeStatus] = Field(default_factory=list)


class SearchHit(Result):
    title: str
    url: str
    snippet: str
    source: str
    untrusted: Literal[True] = True


class SearchResult(Result):
    """`hearth search --json`."""

    query: str
    hops: int
    results: list[SearchHit] = Field(default_factory=list)
    truncated: bool = False
    attempts: int = 0


class ToolsResult(Result):
    """`hearth tools --json`: the registry's manifest and the servers left out."""

    tools: list[dict[str, JsonValue]] = Field(default_factory=list)
    warnings: list[WarningView] = Field(default_factory=list)


class AuditRecordView(Result):
    seq: int
    time: float
    plan_id: str
    signer: str
    step: str
    args_hash: str
    decision: str
    reason: str
    outcome: str


class AuditResult(Result):
    """`hearth audit --json`; `problem` only when verification found one."""

    records: list[AuditRecordView] = Field(default_factory=list)
    verified: bool | None = None
    problem: str | None = None

    @model_serializer(mode="wrap")
    def _optional_problem(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("problem") is None:
            out.pop("problem", None)
        return out


class ConversationSummary(Result):
    id: str
    title: str
    turns: int
    updated: float
    source: Literal["user", "api"] = "user"  # "api": an app's requests over the local API


class TurnView(Result):
    """One turn: a request, where it ran, its plans and its answer."""

    request_id: str
    text: str
    route: str
    planner: str | None = None
    plans: list[PlanView] = Field(default_factory=list)
    answer: str = ""
    time: float
    state: Literal["running", "answered", "failed", "interrupted"] = "answered"
    error: str | None = None  # why a failed or interrupted request has no answer


class ConversationDetail(Result):
    """`hearth conversations ID --json`: the summary's fields with the turns listed."""

    id: str
    title: str
    updated: float
    turns: list[TurnView] = Field(default_factory=list)


class ConversationsResult(Result):
    """`hearth conversations --json`."""

    conversations: list[ConversationSummary] = Field(default_factory=list)


class ClientToolCall(Result):
    """A call an OpenAI client's own tool should make (the app runs it, not the phone)."""

    id: str
    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class Completion(Result):
    """`Service.complete`: the answer, or the calls for the app to run."""

    answer: str = ""
    calls: list[ClientToolCall] = Field(default_factory=list)
    route: Literal["local", "remote"]
    reason: str = ""
    usage: UsageView = Field(default_factory=UsageView)
    finish: Literal["stop", "length"] = "stop"
