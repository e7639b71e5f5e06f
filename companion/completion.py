"""Completions with an app's own tools (an OpenAI client's): plan, and hand the calls back.

Nothing is executed on the phone: the home node (or the phone's own model) plans with the
app's tools, and the calls come back as `ClientToolCall`s in a `Completion` for the app to
run. `complete` plans on the home node when it is reachable (`auto`), else locally. One
request is one generation: the home's session ends with its first plan. A token limit
that cuts a call is an answer that says `length`, never an error (`cut_by_the_limit`).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import ValidationError

from hearth.protocol.model.prose import ProseOnly
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import (
    AnswerSettings,
    ChatMessage,
    Observation,
    ToolSpec,
    Usage,
)

from .confirm import Scripted
from .egress import Destination
from .events import AskRequest, Event, EventSink, TokenEvent
from .local_route import local_round
from .prompt import build
from .results import ClientToolCall, Completion, UsageView
from .tools.builtin.device import device_context
from .turn import Turn

if TYPE_CHECKING:
    from .link import NodeLink
    from .service import Service

CUT_CALL = "a tool call was cut off"
"""How the model layer (`toolcalls.parse`) words a round whose tool call the token limit
cut, on the phone as on the node (whose error frame carries the same words)."""


def cut_by_the_limit(exc: HearthError) -> bool:
    """Whether `exc` is a round whose tool call the token limit cut: where an app runs
    the calls (the API), a `length` answer, not an error (DESIGN "Model output")."""
    return exc.code is ErrorCode.PLAN_REJECTED and CUT_CALL in exc.message


def cut(route: Literal["local", "remote"], reason: str) -> Completion:
    """The answer to a round the token limit cut inside a call: `length`, no call (those
    complete before the cut one are not handed on by the model layer), usage not known."""
    return Completion(
        answer="",
        calls=[],
        route=route,
        reason=f"{reason}: the token limit cut a tool call",
        finish="length",
    )


async def complete(
    service: Service,
    messages: list[ChatMessage],
    tools: list[ToolSpec],
    route: Literal["auto", "local", "remote"],
    events: EventSink,
    cancel: anyio.Event,
    tool_choice: Literal["auto", "required", "none"] = "auto",
    generation: AnswerSettings | None = None,
    parallel_tool_calls: bool = True,
) -> Completion:
    """Plan `messages` with the app's `tools` and return the calls for the app to run.
    Without `parallel_tool_calls`, at most one call comes back."""
    if not messages:
        raise HearthError(ErrorCode.INVALID_INPUT, "no messages")
    *earlier, last = messages
    text = last.content if last.role == "user" else None
    try:
        asked = AskRequest(
            text=text or "",
            route=route,
            tool_choice=tool_choice,
            history=earlier if text else messages,
            generation=generation,
        )
    except ValidationError as exc:
        problem = exc.errors(include_url=False, include_input=False)[0]
        raise HearthError(ErrorCode.INVALID_INPUT, f"messages: {problem['msg']}") from None
    executor = service.executor(Scripted(None))
    turn = Turn(
        asked,
        uuid.uuid4().hex,
        events,
        cancel,
        executor,
        build(asked, [], [], executor.egress, text=text, max_turns=0, max_chars=0),
        device_context(service.clock),
    )
    if route != "local" and service.paired:
        async with service.link_to_home() as link:
            if await link.ensure():
                return await _remotely(service, link, turn, tools, parallel_tool_calls)
            if route == "remote":
                raise link.error or HearthError(ErrorCode.UNREACHABLE, link.reason)
    limits = service.settings.limits
    if not parallel_tool_calls:
        limits = limits.model_copy(update={"max_steps": 1})
    try:
        result = await local_round(service.local, turn, tools, service.peer_id, limits)
    except HearthError as exc:
        if not cut_by_the_limit(exc):
            raise
        return cut("local", "on the phone")
    calls = [
        ClientToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=s.tool, arguments=s.arguments)
        for s in (result.plan.steps if result.plan else [])
    ]
    return Completion(
        answer=result.answer,
        calls=calls[: None if parallel_tool_calls else 1],
        route="local",
        reason="on the phone",
        usage=UsageView.of(result.usage),
        finish="length" if result.truncated else "stop",
    )


async def _remotely(
    service: Service, link: NodeLink, turn: Turn, tools: list[ToolSpec], parallel_tool_calls: bool
) -> Completion:
    """One generation on the home node: its first plan's calls are the app's, and the
    session ends there (cancelled: the node writes no second round). Without
    `parallel_tool_calls`, the first call alone (a planner may write more than asked)."""
    from .remote import plan_session  # libp2p loads only when the home is needed

    one = {} if parallel_tool_calls else {"max_steps": 1}
    request = turn.prompt.plan_request(
        Destination.HOME,
        request_id=turn.request_id,
        request=turn.request,
        tools=tools,
        limits=service.settings.limits.model_copy(update={"max_rounds": 2, **one}),
        device=turn.device,
        egress=turn.executor.egress,
        documents_sent=[],
    )
    request = request.model_copy(update={"tools": tools})  # the app's: never filtered
    calls: list[ClientToolCall] = []
    handed = anyio.Event()  # the first plan came: its calls are the app's, the session ends
    ends = anyio.Event()  # the session's cancel: the app's, or `handed`
    prose, said = ProseOnly(), list[str]()  # what the model wrote before its calls

    async def hear(event: Event) -> None:
        if isinstance(event, TokenEvent) and not event.thinking:
            said.append(prose.feed(event.text))
        await turn.events(event)

    async def hand_back(plan: Any, _state: Any) -> list[Observation]:
        calls.extend(
            ClientToolCall(id=f"call_{s.id}", name=s.tool, arguments=s.arguments)
            for s in plan.steps[: None if parallel_tool_calls else 1]
        )
        handed.set()
        ends.set()
        await anyio.sleep_forever()  # the session's cancel ends it here: no observations
        return []

    async def end_with_the_app() -> None:
        await turn.cancel.wait()
        ends.set()

    try:
        with single_error():
            async with anyio.create_task_group() as tg:
                tg.start_soon(end_with_the_app)
                one_round = dataclasses.replace(turn, events=hear, cancel=ends)
                session = await plan_session(link, one_round, request, hand_back)
                tg.cancel_scope.cancel()
    except HearthError as exc:
        if handed.is_set() and exc.code is ErrorCode.CANCELLED and not turn.cancel.is_set():
            return Completion(
                answer="".join(said).strip(),
                calls=calls,
                route="remote",
                reason="planned on the home node",
                # the node counts tokens only in `Final`, which an ended session never gets
                usage=UsageView(),
            )
        if cut_by_the_limit(exc):
            return cut("remote", "planned on the home node")
        raise
    return Completion(  # the node answered without a plan
        answer=session.outcome.final.answer,
        calls=[],
        route="remote",
        reason="planned on the home node",
        usage=UsageView.of(session.outcome.final.usage or Usage()),
        finish=session.outcome.final.finish,
    )
