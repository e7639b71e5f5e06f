"""One request on its way through the service: what was asked, the result being built,
who hears of its progress, and the executor its plans run through."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio

from hearth.protocol.wire.messages import ChatMessage, Observation, Plan, PlanStep

from .audit import AuditRecord
from .documents import Document
from .egress import Destination, StepOutcome
from .events import AskRequest, EventSink, RouteEvent, StepEvent
from .executor import FRIEND, Executor, SessionState
from .results import AskResult, PlanView, StepView

NOT_RUN = Observation(step_id="-", status="skipped", error="not run")


def plan_view(plan: Plan, observations: list[Observation]) -> PlanView:
    """One plan of `hearth ask --json`: each step with its own round's observation (step
    ids repeat across rounds, so nothing is matched across plans); a step that is not
    ok says why."""
    steps = []
    for i, s in enumerate(plan.steps):
        obs = observations[i] if i < len(observations) else NOT_RUN
        steps.append(
            StepView(
                id=s.id,
                round=plan.round,
                tool=s.tool,
                arguments=s.arguments,
                status=obs.status,
                result=obs.result,
                error=obs.error if obs.status == "ok" else obs.error or obs.status,
            )
        )
    return PlanView(plan_id=plan.plan_id, signer=plan.signer, round=plan.round, steps=steps)


@dataclass
class Turn:
    """A request being answered."""

    request: AskRequest
    result: AskResult
    events: EventSink
    cancel: anyio.Event
    executor: Executor
    history: dict[Destination, list[ChatMessage]] = field(default_factory=dict)
    """Earlier turns of the conversation, as the model at each destination may see them."""
    started: float = field(default_factory=time.monotonic)
    private_steps: set[str] = field(default_factory=set)  # "plan_id/step_id"
    documents: list[Document] = field(default_factory=list)  # attached, as read on the phone
    documents_sent: list[bool] = field(default_factory=list)  # which of them left the phone

    async def execute(
        self, plan: Plan, state: SessionState, destination: Destination
    ) -> list[Observation]:
        """Run `plan`, telling the events of each step; the observations are what
        `destination` may learn. When it is cut off (the node ended the session, or
        Ctrl-C), the running step is journaled `cancelled` and the plan closed: no later
        ask reruns that step or runs the steps after it unasked."""

        async def on_step(plan: Plan, step: PlanStep, outcome: StepOutcome | None) -> None:
            if outcome is not None and outcome.labels.private:
                self.private_steps.add(f"{plan.plan_id}/{step.id}")
            await self.events(
                StepEvent(
                    plan_id=plan.plan_id,
                    round=plan.round,
                    step_id=step.id,
                    tool=step.tool,
                    status="running" if outcome is None else outcome.status,
                    error=None if outcome is None else outcome.error,
                )
            )

        state.request = state.request or self.request.text  # the user's own words
        try:
            outcomes = await self.executor.run_plan(
                plan,
                state,
                friend=destination is Destination.FRIEND,
                remote=destination is not Destination.PHONE,
                on_step=on_step,
            )
        except anyio.get_cancelled_exc_class():
            self._cut_off(plan)
            raise
        finally:  # the answer is written after the planner read these
            read = set(self.result.untrusted_sources) | state.tainted_by
            if destination is Destination.FRIEND:
                read.add(FRIEND)
            self.result.untrusted_sources = sorted(read)
        return [self.executor.egress.observation(o, destination) for o in outcomes]

    def _cut_off(self, plan: Plan) -> None:
        journal, audit = self.executor.journal, self.executor.audit
        for record in journal.steps(plan.plan_id).values():
            if record.state == "running":
                reason = "cut off mid-run: it may or may not have happened"
                journal.finished(
                    plan.plan_id,
                    record.step_id,
                    "cancelled",
                    error=reason,
                    tool=record.tool,
                    labels=record.labels,
                )
                audit.append(
                    AuditRecord(
                        plan.plan_id, plan.signer, record.step_id, "", "-", reason, "cancelled"
                    )
                )
        journal.close_plan(plan.plan_id)

    async def announce_route(self, peer_id: str) -> None:
        """The route taken, to the audit log (as `peer_id` decided it) and the events."""
        r = self.result
        self.executor.audit.append(
            AuditRecord(r.request_id, peer_id, "-", "", "route", f"{r.route}: {r.reason}", "ok")
        )
        await self.events(
            RouteEvent(
                route=r.route,
                planner=r.planner,
                reason=r.reason,
                escalated=r.escalated,
                deferred=r.deferred,
            )
        )

    def elapsed_ms(self) -> float:
        return round((time.monotonic() - self.started) * 1000, 1)
