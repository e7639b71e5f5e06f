"""The router: local, remote, or local-then-escalate, per request, with a reason.

Offline is always local. Every decision carries a short reason the user sees and
the audit log keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from hearth.protocol.wire.messages import DeviceContext

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
        return Decision("remote", f"{inp.candidate_tools} candidate tools")
    if MULTI_STEP.search(inp.text):
        return Decision("remote", "looks like multi-step work")
    if inp.conversation_turns > 6:
        return Decision("remote", "long conversation")
    if inp.device.battery is not None and inp.device.battery < 20 and not inp.device.charging:
        return Decision("remote", f"battery at {inp.device.battery}%: saving the phone's power")
    return Decision("local", "simple request: the phone's model can do it", may_escalate=True)
