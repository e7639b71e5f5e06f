"""The one egress: everything that leaves the phone passes this filter.

Plan requests (the tool schemas the owner lets out), observations (results and
errors alike: an error is a value derived from its arguments) and calls to
open-world tools (web, messages, MCP servers that reach out). A private value
leaves only for a destination the owner's policy allows; otherwise it is replaced
by a redaction marker, so the node learns "s2 failed: redacted", never the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import JsonValue

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Observation, PlanRequest

from .labels import Labels

REDACTED = {"redacted": "private to this phone"}
REDACTED_ERROR = "redacted: it concerns values private to this phone"


class Destination(StrEnum):
    """Where a value would go."""

    PHONE = "phone"  # stays here: shown to the phone's owner
    HOME = "home"  # the owner's home node
    FRIEND = "friend"  # a friend's node planning for this phone
    OPEN_WORLD = "open-world"  # an open-world tool: the web, a recipient, an MCP server


@dataclass(frozen=True)
class Policy:
    """The owner's rules on what may leave."""

    private_to_home: bool = False  # may private results go back to the owner's home node?
    never_remote_tools: frozenset[str] = frozenset()  # schemas that never leave the phone


@dataclass(frozen=True)
class StepOutcome:
    """What the executor holds about one finished step, labels included."""

    step_id: str
    status: Literal["ok", "error", "refused", "skipped", "timed_out"]
    labels: Labels
    result: JsonValue = None
    error: str | None = None
    source: str | None = None  # where an untrusted result came from


class Egress:
    """Applies the owner's policy to every value on its way out."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def allows(self, labels: Labels, destination: Destination) -> bool:
        if not labels.private or destination is Destination.PHONE:
            return True
        return destination is Destination.HOME and self.policy.private_to_home

    def observation(self, outcome: StepOutcome, destination: Destination) -> Observation:
        """The step as `destination` may learn it: private results and errors redacted."""
        shown = self.allows(outcome.labels, destination)
        error = outcome.error
        if outcome.status != "ok" and error is None:
            error = "not run"  # every step that is not ok says why
        return Observation(
            step_id=outcome.step_id,
            status=outcome.status,
            result=outcome.result if shown else REDACTED,
            error=error if shown or error is None else REDACTED_ERROR,
            untrusted=bool(outcome.labels.untrusted),
            source=outcome.source,
        )

    def tool_call(self, tool: str, labels: Labels) -> None:
        """An open-world tool may not carry private values out: `plan_rejected`."""
        if not self.allows(labels, Destination.OPEN_WORLD):
            raise HearthError(
                ErrorCode.PLAN_REJECTED, f"{tool} would carry private values off the phone"
            )

    def request(self, request: PlanRequest) -> PlanRequest:
        """A plan request without the schemas the policy keeps on the phone."""
        keep = [t for t in request.tools if t.function.name not in self.policy.never_remote_tools]
        return request.model_copy(update={"tools": keep})
