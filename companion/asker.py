"""The asker: runs a request's route plan, one attempt after the other.

`answer` looks at the link only when the route plan needs it (a local route, or a
phone that is not paired, touches nothing of it), asks `routeplan.route_plan` for
the attempts, and runs them in order: each returns an outcome (`outcomes.py`), and
the outcome says whether the next one runs. One attempt, one method: the phone's
own model (`local_route`), the home node or a friend's (`remote`), the inbox.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ToolSpec

from .documents import release
from .egress import Destination
from .friends import FriendPlanner, friend_planners, may_plan, named
from .local_route import answer_locally
from .outcomes import Answered, Declined, Escalated, Lost, Outcome, Route
from .results import WarningView
from .routeplan import Attempt, RouteInput, needs_friends, route_plan
from .turn import Turn

if TYPE_CHECKING:
    from .link import NodeLink
    from .service import Service

FALLBACK = (ErrorCode.UNREACHABLE, ErrorCode.TIMED_OUT)  # `auto` answers these locally
# a friend's node that answers these did not plan: the next friend is tried, then the phone
FRIEND_DECLINED = (ErrorCode.REFUSED, ErrorCode.BUSY, *FALLBACK)
KEPT_ANSWER = "Kept for your home node: it answers when it is back."


@dataclass(frozen=True)
class Link:
    """The link as the request found it: which node, and how long connecting took."""

    node: str | None = None
    connect_ms: float | None = None


class Asker:
    """Answers one turn with the service's models, link, tools and inbox."""

    def __init__(self, service: Service, turn: Turn, conversation_id: str | None) -> None:
        self.service = service
        self.turn = turn
        self.conversation_id = conversation_id

    async def answer(self, turns: int) -> tuple[Answered, Link]:
        """Route and answer; `turns`: the conversation's length with this request."""
        service, request = self.service, self.turn.request
        asked = request.route
        if asked == "local" or not service.paired:
            return await self._run(route_plan(asked, service.policy, None), None), Link()
        async with service.link_to_home() as link:
            t0 = time.monotonic()
            if asked == "auto" and link is service.link and link.dialled:
                reachable = link.connected  # the kept link knows: no dial on the way
            else:
                reachable = await link.ensure()
            connected = Link(link.node, round((time.monotonic() - t0) * 1000, 1))
            seen = RouteInput(
                text=request.text,
                candidate_tools=len(service.registry.candidates(request.text).matched),
                conversation_turns=turns,
                node_reachable=reachable,
                node_reason=link.reason,
                node_latency_ms=link.latency_ms,
                device=self.turn.device,
                document_chars=sum(d.chars for d in self.turn.prompt.documents),
            )
            friends = self._friends(link) if needs_friends(asked, service.policy, seen) else []
            attempts = route_plan(asked, service.policy, seen, friends)
            return await self._run(attempts, link), connected

    def _friends(self, link: NodeLink) -> list[FriendPlanner]:
        """The friends that may plan now (the roster is read only when it matters)."""
        from hearth.protocol.transport.addressbook import AddressBook

        book = AddressBook(self.service.home)
        policy = self.service.policy
        return friend_planners(link.roster.roster, book.get, policy, False, now=time.time())

    async def _run(self, attempts: list[Attempt], link: NodeLink | None) -> Answered:
        """Each attempt whose turn has come, until one answers."""
        previous: Outcome | None = None
        notes: list[str] = []
        why = ""
        skipped: str | None = None
        escalated = False
        for attempt in attempts:
            if not _follows(attempt, previous) or attempt.kind == skipped:
                continue
            reason = attempt.reason_after(why, notes)
            outcome = await self._attempt(attempt, reason, escalated, attempts, link)
            if isinstance(outcome, Answered):
                return outcome
            if isinstance(outcome, Declined):
                notes += [outcome.note] if outcome.note else []
                skipped = attempt.kind if outcome.rest else None
            else:
                why = outcome.why
                escalated |= isinstance(outcome, Escalated)
            previous = outcome
        raise HearthError(ErrorCode.INTERNAL, "no attempt of the route plan answered")

    async def _attempt(
        self,
        attempt: Attempt,
        reason: str,
        escalated: bool,
        attempts: list[Attempt],
        link: NodeLink | None,
    ) -> Outcome:
        if attempt.kind == "local":
            return await self._locally(reason, escalated, may_escalate=attempt.may_escalate)
        if attempt.kind == "keep":
            return await self._keep_for_home(reason)
        if link is None:  # the route plan dials only once paired
            raise HearthError(ErrorCode.INTERNAL, f"a {attempt.kind} attempt without a link")
        if attempt.kind == "home":
            try:
                return await self.remotely(link, Route("remote", reason, link.node, escalated))
            except HearthError as exc:
                if not attempt.fallback or exc.code not in FALLBACK:
                    raise
                return Lost(exc.message)
        if attempt.kind == "friend" and attempt.friend is not None:
            friends = [a.friend for a in attempts if a.friend is not None]
            return await self._by_friend(link, attempt.friend, reason, friends, attempt.ask_first)
        raise link.error or HearthError(ErrorCode.UNREACHABLE, link.reason)

    async def _locally(
        self, reason: str, escalated: bool, *, may_escalate: bool = False, deferred: bool = False
    ) -> Answered | Escalated:
        service = self.service
        route = Route("local", reason, service.peer_id, escalated, deferred)
        threshold = service.policy.confidence_threshold if may_escalate else None
        tools = candidates(service, self.turn.request.text)
        try:
            return await answer_locally(
                service.local, self.turn, tools, route, service.settings.limits, threshold=threshold
            )
        except HearthError as exc:  # the home node may still answer it
            if not may_escalate:
                raise
            return Escalated(exc.message)

    async def _by_friend(
        self,
        link: NodeLink,
        friend: FriendPlanner,
        reason: str,
        friends: list[FriendPlanner],
        ask_first: bool,
    ) -> Outcome:
        """Plan on a friend's node while the home is unreachable (policy `ask`: the user
        is asked once per request, naming the friends in order)."""
        if ask_first:
            question = may_plan(friends, self.turn.request_id)
            if not await self.turn.executor.confirmer.confirm(question):
                return Declined("you did not let a friend's node plan it", rest=True)
        try:
            route = Route("remote", reason, friend.peer_id, friend=True)
            return await self.remotely(link, route, friend)
        except HearthError as exc:
            if exc.code not in FRIEND_DECLINED:
                raise
            return Declined(f"friend {named(friend)}: {exc.message}")

    async def _keep_for_home(self, reason: str) -> Answered | Escalated | Declined:
        """Keep a request the home would have planned, for when it is back (the policy's
        `wait_for_home`), and answer it locally meanwhile; too many waiting already:
        declined (answered locally only). Kept, it is never reported failed: a phone that
        cannot answer meanwhile (no model) says so and that the home will."""
        turn = self.turn
        try:
            self.service.inbox.keep(
                turn.request_id, self.conversation_id, turn.request, time.time()
            )
        except HearthError:
            return Declined()
        try:
            return await self._locally(reason, False, deferred=True)
        except HearthError as exc:
            why = (
                f"{reason}; the phone could not answer meanwhile ({exc.code.value}: {exc.message})"
            )
            route = Route("local", why, self.service.peer_id, deferred=True)
            await turn.announce_route(route, route.planner)
            return Answered(route, KEPT_ANSWER, input=turn.prompt.labels(Destination.PHONE))

    async def remotely(
        self, link: NodeLink, route: Route, friend: FriendPlanner | None = None
    ) -> Answered:
        """Plan on the home node, or on `friend`'s with what a friend may see."""
        from .remote import answer_remotely  # libp2p loads only when the home is needed

        service, turn = self.service, self.turn
        where = Destination.HOME if friend is None else Destination.FRIEND
        sent = await release(
            turn.prompt.documents,
            service.policy,
            turn.executor.confirmer,
            request_id=turn.request_id,
            destination=where,
        )
        limits = service.settings.limits
        model = link.model if friend is None else None  # a friend's context is not known
        shown = turn.prompt.shown(where, sent)
        considered, matched = remote_tools(service, turn.request.text, shown)
        tools = turn.prompt.offer(
            considered,
            matched,
            n_ctx=model.n_ctx if model is not None else 0,
            max_tokens=limits.max_tokens,
            destination=where,
            chars_per_token=model.chars_per_token if model is not None else None,
        )
        if len(tools) < len(considered):
            turn.warnings.append(left_out(considered, tools, model.n_ctx if model else 0))
        request = turn.prompt.plan_request(
            where,
            request_id=turn.request_id,
            request=turn.request,
            tools=tools,
            limits=limits,
            device=turn.device,
            egress=turn.executor.egress,
            documents_sent=sent,
        )
        return await answer_remotely(link, turn, request, route, friend, sent, model)


def _follows(attempt: Attempt, previous: Outcome | None) -> bool:
    """Whether `attempt` runs after `previous` (None: nothing ran yet)."""
    if previous is None:
        return attempt.after == "start"
    return {
        Escalated: "escalated",
        Declined: "declined",
        Lost: "lost",
    }.get(type(previous)) == attempt.after


def candidates(service: Service, text: str) -> list[ToolSpec]:
    """On the phone, a request that names no tool's words is a plain question."""
    registry = service.registry
    return registry.specs(set(registry.candidates(text).matched))


def remote_tools(
    service: Service, text: str, shown: str = ""
) -> tuple[list[ToolSpec], frozenset[str]]:
    """The request's candidate tools among those the policy lets out (all of them
    when the text points to none; the egress drops never-remote ones again), with those
    what the planner is `shown` beside it points to, and those its words point to."""
    registry = service.registry
    allowed = set(registry.tools) - set(service.policy.never_remote_tools)
    selection = registry.candidates(text, allowed, shown=shown)
    return registry.specs(set(selection.offered)), selection.matched


def left_out(considered: list[ToolSpec], offered: list[ToolSpec], n_ctx: int) -> WarningView:
    """What the user is told when tools were cut to fit the planner's context."""
    kept = {t.function.name for t in offered}
    cut = [t.function.name for t in considered if t.function.name not in kept]
    named = ", ".join(cut[:8]) + (f" and {len(cut) - 8} more" if len(cut) > 8 else "")
    return WarningView(
        source="planner",
        code="tools_left_out",
        message=f"{len(cut)} of {len(considered)} tools were left out to fit the planner's "
        f"context of {n_ctx} tokens: {named}",
    )
