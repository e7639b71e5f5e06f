"""One request on its way through the service: what was asked, what its planner may
read (the prompt), who hears of its progress, and the executor its plans run through."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio

from hearth.protocol.model.chat import stated_time
from hearth.protocol.wire.messages import DeviceContext, Limits, Observation, Plan, PlanStep

from .audit import AuditRecord
from .egress import Destination, StepOutcome
from .events import AskRequest, EventSink, RouteEvent, StepEvent
from .executor import FRIEND, Executor, SessionState
from .labels import CLEAN, Labels
from .outcomes import Route
from .prompt import APP_GIVEN, Prompt
from .results import PlanView, StepView, WarningView

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


@dataclass(frozen=True)
class Ran:
    """One plan run: the observations its planner may learn, what they showed it (their
    labels joined), and each step's labels by "plan_id/step_id"."""

    observations: list[Observation]
    read: Labels
    steps: dict[str, Labels]
    tainted_by: frozenset[str]  # the session's untrusted sources once it ran


@dataclass
class Turn:
    """A request being answered."""

    request: AskRequest
    request_id: str
    events: EventSink
    cancel: anyio.Event
    executor: Executor
    prompt: Prompt
    device: DeviceContext = field(default_factory=DeviceContext)
    """The phone when the request was asked (its time and zone, battery, network)."""
    warnings: list[WarningView] = field(default_factory=list)
    """What the user is told beside the answer (tools left out to fit the planner)."""
    started_at: float = field(default_factory=time.monotonic)
    begun: anyio.Event | None = None
    out_after_private: list[str] = field(default_factory=list)
    """The open-world calls --yes covered after a private read, the conversation's
    earlier turns' and this turn's: kept with the turn (`TurnLabels`)."""
    """Set once the request is kept in its conversation as started (`ask` keeps it while
    the request goes on; None: kept before, as a request the inbox sends)."""

    @property
    def now(self) -> str | None:
        """The phone's time when the request was asked, as every planner reads it."""
        return stated_time(self.device.local_time, self.device.timezone)

    async def started(self) -> None:
        """Once the request is kept as started: what it does from then on (a plan's
        effects, its answer) is never lost with it."""
        if self.begun is not None:
            await self.begun.wait()

    def session(
        self,
        destination: Destination,
        documents_sent: list[bool] | None = None,
        limits: Limits | None = None,
    ) -> SessionState:
        """A plan session that starts with the taint of everything its planner reads, and
        knowing where it read private data."""
        tainted = set(self.prompt.labels(destination, documents_sent).untrusted)
        private = set(self.prompt.private_reads(destination, documents_sent))
        spent = list(self.prompt.out_after_private)
        if private & APP_GIVEN:  # the app keeps the conversation: what it spent is unknown
            spent.append("the app's conversation")
        return SessionState(
            tainted_by=tainted, read_private=private, limits=limits, out_after_private=spent
        )

    async def execute(self, plan: Plan, state: SessionState, destination: Destination) -> Ran:
        """Run `plan`, telling the events of each step; the observations are what
        `destination` may learn. When it is cut off (the node ended the session, or
        Ctrl-C), the running step is journaled `cancelled` and the plan closed: no later
        ask reruns that step or runs the steps after it unasked."""

        async def on_step(plan: Plan, step: PlanStep, outcome: StepOutcome | None) -> None:
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
        await self.started()  # no effect of a request that could be lost with it
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
        self.out_after_private.extend(
            t for t in state.out_after_private if t not in self.out_after_private
        )
        egress = self.executor.egress
        read = CLEAN
        for o in outcomes:  # a redacted value shows only that it was there
            shown = egress.allows(o.labels, destination)
            read |= o.labels if shown else Labels(untrusted=o.labels.untrusted)
        friend = {FRIEND} if destination is Destination.FRIEND else set()
        return Ran(
            [egress.observation(o, destination) for o in outcomes],
            read,
            {f"{plan.plan_id}/{o.step_id}": o.labels for o in outcomes},
            frozenset(state.tainted_by | friend),
        )

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

    async def announce_route(self, route: Route, peer_id: str) -> None:
        """The route taken, to the audit log (as `peer_id` decided it) and the events."""
        self.executor.audit.append(
            AuditRecord(
                self.request_id, peer_id, "-", "", "route", f"{route.route}: {route.reason}", "ok"
            )
        )
        await self.events(
            RouteEvent(
                route=route.route,
                planner=route.planner,
                reason=route.reason,
                escalated=route.escalated,
                deferred=route.deferred,
            )
        )

    def elapsed_ms(self) -> float:
        return round((time.monotonic() - self.started_at) * 1000, 1)
