"""Completions with an app's own tools (an OpenAI client's): plan, and hand the calls back.

Nothing is executed on the phone: the home node (or the phone's own model) plans with the
app's tools, and the calls come back as `ClientToolCall`s in a `Completion` for the app to
run. `complete` plans on the home node when it is reachable (`auto`), else locally.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import ValidationError

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
from .events import AskRequest, EventSink
from .local_route import local_round
from .prompt import build
from .results import ClientToolCall, Completion, UsageView
from .tools.builtin.device import device_context
from .turn import Turn

if TYPE_CHECKING:
    from .link import NodeLink
    from .service import Service

RETURNED = "returned to the app"


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
    result = await local_round(service.local, turn, tools, service.peer_id, limits)
    calls = [
        ClientToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=s.tool, arguments=s.arguments)
        for s in (result.plan.steps if result.plan else [])
    ]
    return Completion(
        answer=result.answer,
        calls=calls,
        route="local",
        reason="on the phone",
        usage=UsageView.of(result.usage),
        finish="length" if result.truncated else "stop",
    )


async def _remotely(
    service: Service, link: NodeLink, turn: Turn, tools: list[ToolSpec], parallel_tool_calls: bool
) -> Completion:
    """One plan from the node, its calls returned; the node hears every step was
    `skipped` ("returned to the app") and writes no more plans (two rounds at most)."""
    from .remote import plan_session  # libp2p loads only when the home is needed

    one = {} if parallel_tool_calls else {"max_steps": 1}
    request = turn.prompt.plan_request(
        Destination.HOME,
        request_id=turn.request_id,
        request=turn.request,
        tools=tools,
        limits=service.settings.limits.model_copy(update={"max_rounds": 2, **one}),
        device=device_context(),
        egress=turn.executor.egress,
        documents_sent=[],
    )
    request = request.model_copy(update={"tools": tools})  # the app's: never filtered
    calls: list[ClientToolCall] = []

    async def hand_back(plan: Any, _state: Any) -> list[Observation]:
        if not calls:
            calls.extend(
                ClientToolCall(id=f"call_{s.id}", name=s.tool, arguments=s.arguments)
                for s in plan.steps
            )
        return [Observation(step_id=s.id, status="skipped", error=RETURNED) for s in plan.steps]

    session = await plan_session(link, turn, request, hand_back)
    return Completion(
        answer="" if calls else session.outcome.final.answer,
        calls=calls,
        route="remote",
        reason="planned on the home node",
        usage=UsageView.of(session.outcome.final.usage or Usage()),
        finish=session.outcome.final.finish,
    )
