"""Routing: where a request runs, decided in one place, as a plan of attempts.

`decide` is the router's rule book: local, remote, or local-then-escalate, with a short
reason the user sees and the audit log keeps (offline is always local). `route_plan` is a
pure function of what the phone knows before it plans (the route asked, whether it is
paired, what `decide` sees, the friends that may plan): it returns the attempts the asker
runs one after the other, each with its reason and when it runs. An attempt ends in an
outcome (`outcomes.py`); what the outcome was decides whether the next attempt runs:

    local (may escalate) ──escalated──▶ home ──lost──▶ local fallback
    friend 1 ──declined──▶ friend 2 … ──declined──▶ keep for home ──declined──▶ local

A new rule about where a request runs is one more test in `decide`; a new rule about what
is tried after what is one more attempt in `route_plan` (and its outcome in the asker).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Literal

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import DeviceContext

from .friends import FriendPlanner, named
from .policy import OwnerPolicy

Route = Literal["local", "remote", "auto"]
MULTI_STEP = re.compile(
    r"\b(and then|then|after that|and also|every|each|all of|plan|"
    r"compare|summari[sz]e|research|schedule)\b",
    re.I,
)


@dataclass(frozen=True)
class RouteInput:
    """What the router looks at."""

    text: str
    candidate_tools: int
    conversation_turns: int = 1
    needs_remote_tool: bool = False
    device: DeviceContext = field(default_factory=DeviceContext)
    node_reachable: bool = False
    node_reason: str = ""
    node_latency_ms: float | None = None
    document_chars: int = 0  # of the request's attached documents


@dataclass(frozen=True)
class Decision:
    route: Literal["local", "remote"]
    reason: str
    may_escalate: bool = False


def decide(inp: RouteInput, policy: OwnerPolicy, asked: Route = "auto") -> Decision:
    """Where this request runs, and why."""
    if not inp.node_reachable:
        reason = f"home node unreachable ({inp.node_reason or 'offline'}): answered locally"
        if inp.needs_remote_tool:
            reason += "; it needed a remote tool, which is not possible offline"
        return Decision("local", reason)
    if asked == "local":
        return Decision("local", "local route requested")
    if asked == "remote":
        return Decision("remote", "remote route requested")
    if inp.device.metered and not policy.offload_on_metered:
        return Decision("local", "metered network and the policy keeps requests local there")
    if inp.needs_remote_tool:
        return Decision("remote", "needs a tool only the home node has")
    if len(inp.text) > policy.long_request_chars:
        return Decision("remote", f"long request ({len(inp.text)} characters)")
    if inp.document_chars > policy.long_request_chars:
        return Decision("remote", f"attached documents ({inp.document_chars} characters)")
    if inp.candidate_tools > policy.many_tools:
        return Decision(
            "remote",
            f"the request may need any of {inp.candidate_tools} tools, more than the "
            f"phone's model chooses among well ({policy.many_tools})",
        )
    if MULTI_STEP.search(inp.text):
        return Decision("remote", "looks like multi-step work")
    if inp.conversation_turns > 6:
        return Decision("remote", "long conversation")
    if inp.device.battery is not None and inp.device.battery < 20 and not inp.device.charging:
        return Decision("remote", f"battery at {inp.device.battery}%: saving the phone's power")
    return Decision("local", "simple request: the phone's model can do it", may_escalate=True)


Kind = Literal["local", "home", "friend", "keep", "unreachable"]
After = Literal["start", "escalated", "declined", "lost"]
"""Which outcome of the attempt before lets this one run (`start`: it is the first)."""
WHY = "{why}"  # in a reason: the message of the outcome that led to the attempt
KEPT = "kept for the home node, sent when it is back"


@dataclass(frozen=True)
class Attempt:
    """One way to answer the request."""

    kind: Kind
    reason: str
    after: After = "start"
    may_escalate: bool = False  # local: a weak answer or failure escalates to the home
    fallback: bool = False  # home: a link lost mid-request is answered locally next
    friend: FriendPlanner | None = None
    ask_first: bool = False  # friend: the user is asked once before the first friend

    def reason_after(self, why: str, notes: list[str]) -> str:
        """The reason the user sees: the outcome before filled in, the notes of the
        attempts that declined appended (and the kept request said last)."""
        reason = self.reason.replace(WHY, why)
        tail = [KEPT] if self.kind == "keep" else []
        return "; ".join([reason, *notes, *tail])


def route_plan(
    asked: Route,
    policy: OwnerPolicy,
    seen: RouteInput | None,
    friends: list[FriendPlanner] | None = None,
) -> list[Attempt]:
    """The attempts for a request; `seen` None: not paired (the link is not consulted).
    `friends`: the friends that may plan while the home is away (None: not looked up,
    which `needs_friends` says when it matters)."""
    if asked == "local":  # the phone's own model, as asked: the home is not dialled
        return [Attempt("local", "local route requested")]
    if seen is None:
        if asked == "remote":
            raise HearthError(ErrorCode.INVALID_INPUT, "not paired: run `hearth pair -`")
        return [Attempt("local", "not paired with a home node")]
    decision = decide(seen, policy, asked)
    if needs_friends(asked, policy, seen):
        return _while_home_away(asked, policy, decision, friends or [])
    if decision.route == "local":
        local = Attempt("local", decision.reason, may_escalate=decision.may_escalate)
        if not local.may_escalate:
            return [local]
        return [local, _home("escalated: " + WHY, asked, "escalated"), _lost()]
    home = _home(decision.reason, asked)
    return [home, _lost()] if home.fallback else [home]


def needs_friends(asked: Route, policy: OwnerPolicy, seen: RouteInput) -> bool:
    """Whether the request would go to the home node, which is unreachable: then the
    friends (and the inbox) come in."""
    if seen.node_reachable or asked == "local":
        return False
    home_route = decide(dataclasses.replace(seen, node_reachable=True), policy)
    return asked == "remote" or home_route.route == "remote"


def _home(reason: str, asked: Route, after: After = "start") -> Attempt:
    return Attempt("home", reason, after=after, fallback=asked == "auto")


def _lost() -> Attempt:
    return Attempt("local", f"home node lost mid-request ({WHY}): answered locally", after="lost")


def _while_home_away(
    asked: Route, policy: OwnerPolicy, decision: Decision, friends: list[FriendPlanner]
) -> list[Attempt]:
    """Friends in order, then (auto) the inbox and the phone; (remote) the error."""
    attempts: list[Attempt] = []
    reason = decision.reason
    if policy.friend_planners == "never":
        reason += "; no friend's node may plan (policy friend_planners = never)"
    elif not friends:
        reason += "; no friend's node holds the planner role"
    for i, friend in enumerate(friends if policy.friend_planners != "never" else []):
        attempts.append(
            Attempt(
                "friend",
                f"the home node is unreachable: planned by friend {named(friend)}",
                after="start" if i == 0 else "declined",
                friend=friend,
                ask_first=i == 0 and policy.friend_planners == "ask",
            )
        )
    after: After = "declined" if attempts else "start"
    if asked == "remote":
        return [*attempts, Attempt("unreachable", reason, after=after)]
    if policy.wait_for_home:
        attempts.append(Attempt("keep", reason, after=after))
        after = "declined"
    return [*attempts, Attempt("local", reason, after=after)]
