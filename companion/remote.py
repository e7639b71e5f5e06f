"""The remote path: a plan session with the home node over the kept link, or with a
friend's node (dialled through the same host, directly or through relays).

The node plans; each signed plan runs through the phone's executor and its
observations go back through the egress filter. A plan's signer must hold the
`planner` role now; a friend's plans run on the executor's friend path (each of their
literals untrusted). Each round's observations offer the planner the tools what the
rounds so far showed it points to (`more_tools`), so a tool a later step needs is
offered by the round that needs it. The session is bounded twice: by
keepalive (a node that goes silent is dropped within `KEEPALIVE_BOUND_S`) and by the
request's own deadline (a node that stays alive but never ends the session, say by
holding back `Final`, is cut off when `limits.deadline_s` has passed).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from hearth.protocol.transport.keepalive import watch
from hearth.protocol.transport.plans import PLAN_PROTOCOL, Offer, PlanOutcome, run_plan_session
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import (
    ModelInfo,
    Observation,
    Plan,
    PlanRequest,
    Token,
    ToolSpec,
    Usage,
)
from hearth.protocol.wire.roster import Role

from .documents import DocumentProgress
from .egress import REDACTED, REDACTED_ERROR, Destination
from .events import TokenEvent
from .executor import SessionState, read_by_node
from .friends import FriendPlanner, named
from .labels import Labels
from .link import KEEPALIVE_BOUND_S, NodeLink
from .outcomes import Answered, Route
from .results import DocumentView, UsageView
from .turn import Turn, plan_view

DEADLINE_GRACE_S = 1.0  # past the deadline, for the node's own `timed_out` to arrive first
OnPlan = Callable[[Plan, SessionState], Awaitable[list[Observation]]]


@dataclass(frozen=True)
class Session:
    """A finished plan session: the node's outcome, the thinking it streamed, and the
    documents as the node read them."""

    outcome: PlanOutcome
    thought: str
    documents: list[DocumentView]
    tainted_by: frozenset[str]  # the untrusted sources the session saw, first to last


def who(friend: FriendPlanner | None) -> str:
    """The planner as the user knows it: the home node or the friend by name."""
    if friend is None:
        return "the home node"
    return f"friend {named(friend)}"


async def plan_session(
    link: NodeLink,
    turn: Turn,
    request: PlanRequest,
    on_plan: OnPlan,
    friend: FriendPlanner | None = None,
    documents_sent: list[bool] | None = None,
    offer: Offer | None = None,
) -> Session:
    """One plan session for `request` with the home node (or `friend`'s), each plan
    handed to `on_plan` (`offer`: the tools each round's observations bring). It starts
    with the taint of everything the planner reads; the phone holds the planner to the
    request's limits. A silent node is `unreachable`, one that outlasts the deadline
    `timed_out`."""
    peer = link.node if friend is None else friend.peer_id
    where = Destination.HOME if friend is None else Destination.FRIEND
    state = turn.session(where, documents_sent, request.limits)
    thought: list[str] = []
    outcome: PlanOutcome | None = None
    documents = turn.prompt.documents
    sent = documents_sent or [False] * len(documents)
    reading = DocumentProgress(documents, sent)  # the node numbers the documents it got

    async def token(t: Token) -> None:
        if t.thinking:  # progress, kept apart from the answer
            thought.append(t.text)
        await turn.events(TokenEvent(text=t.text, thinking=t.thinking))

    async def execute(plan: Plan) -> list[Observation]:
        return await on_plan(plan, state)

    async def converse(scope: anyio.CancelScope) -> None:
        nonlocal outcome
        stream = await link.host.open(peer, PLAN_PROTOCOL, friend.addrs if friend else None)
        outcome = await run_plan_session(
            stream,
            request,
            phone_id=link.host.peer_id,
            execute=execute,
            on_token=token,
            on_progress=reading.observe,
            cancel=turn.cancel,
            offer=offer,
        )
        scope.cancel()

    deadline = request.limits.deadline_s
    quiet = 0.0
    try:
        with anyio.fail_after(deadline + DEADLINE_GRACE_S), single_error():
            async with anyio.create_task_group() as tg:  # the keepalive bounds a silent node
                tg.start_soon(converse, tg.cancel_scope)
                quiet = await watch(link.host, peer, KEEPALIVE_BOUND_S)
                tg.cancel_scope.cancel()
    except TimeoutError:
        raise HearthError(
            ErrorCode.TIMED_OUT,
            f"{who(friend)} did not finish within the request's deadline of {deadline:g} s",
        ) from None
    if outcome is None:
        raise HearthError(
            ErrorCode.UNREACHABLE, f"{who(friend)} went silent ({quiet:.1f} s without a byte)"
        )
    return Session(outcome, "".join(thought), reading.views(), frozenset(state.tainted_by))


async def answer_remotely(
    link: NodeLink,
    turn: Turn,
    request: PlanRequest,
    route: Route,
    friend: FriendPlanner | None = None,
    documents_sent: list[bool] | None = None,
    model: ModelInfo | None = None,
) -> Answered:
    """Plan on the home node (or `friend`'s), its `model` (None: not known), run its
    plans on the phone; each round offers the tools its results point to, within the
    model's context."""
    await turn.announce_route(route, link.host.peer_id)
    observed: dict[str, list[Observation]] = {}  # by plan id: step ids repeat per round
    where = Destination.HOME if friend is None else Destination.FRIEND
    read = start = turn.prompt.labels(where, documents_sent)
    steps: dict[str, Labels] = {}
    sources: set[str] = set()

    async def run(plan: Plan, state: SessionState) -> list[Observation]:
        nonlocal read
        where = Destination.FRIEND if plan.signer != link.node else Destination.HOME
        roles = link.roster.roster.roles_of(plan.signer, time.time())
        if where is Destination.FRIEND and Role.PLANNER not in roles:
            raise HearthError(
                ErrorCode.REFUSED, f"{who(friend)} signed a plan without the planner role"
            )
        ran = await turn.execute(plan, state, where)
        observed[plan.plan_id] = ran.observations
        read |= ran.read
        steps.update(ran.steps)
        sources.update(ran.tainted_by)
        return ran.observations

    offered = {t.function.name for t in request.tools}
    shown: list[str] = []

    def offer(observations: list[Observation]) -> list[ToolSpec]:
        said = [o.result if o.status == "ok" else o.error for o in observations]
        told = [x for x in said if x not in (REDACTED, REDACTED_ERROR)]  # they point nowhere
        shown.insert(0, json.dumps(told, ensure_ascii=False))  # the newest first
        more = more_tools(turn, request, offered, " ".join(shown), model, where)
        offered.update(t.function.name for t in more)
        return more

    session = await plan_session(link, turn, request, run, friend, documents_sent, offer)
    outcome = session.outcome
    # what the session read, and what the node read itself before it answered; a
    # friend's answer is its model's text, whatever it says it read
    read_all = session.tainted_by | read_by_node(outcome.final.untrusted_inputs)
    if friend is not None:
        read_all |= {f"the answer of friend {named(friend)}"}
    return Answered(
        route=route,
        answer=outcome.final.answer,
        plans=tuple(plan_view(p, observed.get(p.plan_id, [])) for p in outcome.plans),
        documents=tuple(session.documents),
        thinking=session.thought,
        usage=UsageView.of(outcome.final.usage or Usage()),
        finish=outcome.final.finish,
        first_token_ms=(
            None if outcome.first_token_s is None else round(outcome.first_token_s * 1000, 1)
        ),
        input=start,
        labels=read | Labels(untrusted=read_all),
        steps=tuple(steps.items()),
        untrusted_sources=frozenset(sources | read_all),
    )


def more_tools(
    turn: Turn,
    request: PlanRequest,
    offered: set[str],
    shown: str,
    model: ModelInfo | None,
    destination: Destination,
) -> list[ToolSpec]:
    """The tools the request and what its rounds have `shown` the planner (the
    observations as it got them: nothing redacted points anywhere) point to, not
    `offered` yet, among those the owner lets out; within the planner's context beside
    those offered and what it was shown (a long page leaves room for none). None when the
    request pointed to no tool (all were offered then)."""
    registry = turn.executor.registry
    allowed = set(registry.tools) - turn.executor.egress.policy.never_remote_tools
    selection = registry.candidates(turn.request.text, allowed, shown=shown)
    if selection.fallback:
        return []
    new = registry.specs(set(selection.offered) - offered)
    if not new:
        return []
    with contextlib.suppress(HearthError):  # what no longer fits is not offered
        fits = turn.prompt.offer(
            [*request.tools, *new],
            frozenset(offered),
            n_ctx=model.n_ctx if model is not None else 0,
            max_tokens=request.limits.max_tokens,
            destination=destination,
            held=shown,
            chars_per_token=model.chars_per_token if model is not None else None,
        )
        return [t for t in fits if t.function.name not in offered]
    return []
