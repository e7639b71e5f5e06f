"""What one attempt of a route plan came to: immutable values the asker reads.

An attempt answers (`Answered`), hands on to the home node (`Escalated`: the phone's
own model was not sure, or could not do it), steps aside for the next attempt
(`Declined`: a friend's node refused, the user did not let friends plan, the inbox
was full) or loses the home mid-request (`Lost`). Nothing is raised to say so: an
error that ends the request is raised, an outcome is returned. The `AskResult` is
built once, from the answer and the route that led to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .labels import CLEAN, Labels
from .results import AskResult, DocumentView, PlanView, UsageView, WarningView


@dataclass(frozen=True)
class Route:
    """The route an attempt takes, as the user and the audit log hear of it."""

    route: Literal["local", "remote"]
    reason: str
    planner: str
    escalated: bool = False
    deferred: bool = False  # kept for the home node too
    friend: bool = False  # planned by a friend's node

    @property
    def planned_at(self) -> Literal["phone", "home", "friend"]:
        if self.route == "local":
            return "phone"
        return "friend" if self.friend else "home"


@dataclass(frozen=True)
class Answered:
    """The request was answered (its plans run)."""

    route: Route
    answer: str
    plans: tuple[PlanView, ...] = ()
    documents: tuple[DocumentView, ...] = ()
    thinking: str | None = None
    confidence: float | None = None
    first_token_ms: float | None = None
    usage: UsageView = field(default_factory=UsageView)
    finish: Literal["stop", "length"] = "stop"  # "length": the token limit cut the answer
    input: Labels = CLEAN  # of what its planner read before it planned
    labels: Labels = CLEAN  # of everything its planner read: the answer's labels
    steps: tuple[tuple[str, Labels], ...] = ()  # each step's labels, by "plan_id/step_id"
    untrusted_sources: frozenset[str] = frozenset()  # what its plan sessions had read


@dataclass(frozen=True)
class Escalated:
    """The phone's model handed on to the home node, saying why."""

    why: str


@dataclass(frozen=True)
class Declined:
    """This attempt stepped aside; `note` (if any) joins the reasons of the next ones.
    `rest`: the attempts of the same kind after it are skipped too."""

    note: str = ""
    rest: bool = False


@dataclass(frozen=True)
class Lost:
    """The home node was lost mid-request (unreachable, timed out)."""

    why: str


Outcome = Answered | Escalated | Declined | Lost


@dataclass(frozen=True)
class Asked:
    """Who asked, and how the link went: what the result says beside the answer."""

    request_id: str
    conversation_id: str | None
    served_by: Literal["companion", "process"]
    warnings: list[WarningView] = field(default_factory=list)
    node: str | None = None
    connect_ms: float | None = None


def ask_result(asked: Asked, answered: Answered, thinking: bool, total_ms: float) -> AskResult:
    """The one `AskResult` of a request, from its answer."""
    route = answered.route
    timings = {"connect_ms": asked.connect_ms, "first_token_ms": answered.first_token_ms}
    return AskResult(
        request_id=asked.request_id,
        conversation_id=asked.conversation_id,
        served_by=asked.served_by,
        warnings=asked.warnings,
        node=asked.node,
        route=route.route,
        reason=route.reason,
        planner=route.planner,
        escalated=route.escalated,
        deferred=route.deferred,
        plans=list(answered.plans),
        plan=answered.plans[-1] if answered.plans else None,
        answer=answered.answer,
        documents=list(answered.documents),
        thinking=answered.thinking if thinking else None,
        confidence=answered.confidence,
        untrusted_sources=sorted(answered.untrusted_sources),
        usage=answered.usage,
        finish=answered.finish,
        timings={
            **{k: v for k, v in timings.items() if v is not None},
            "total_ms": total_ms,
        },
    )
