"""The local path: the phone's own model plans (or answers), the executor runs the plan.

Nothing leaves the phone on this path, so earlier turns are shown to the model
whole (inert), and plan results are shown to the user unredacted. The plan session
starts with the taint of everything the model read: earlier turns, documents.
"""

from __future__ import annotations

import dataclasses

from hearth.protocol.wire.messages import Limits, ToolSpec

from .documents import DocumentProgress
from .egress import Destination
from .events import TokenEvent
from .local_model import LocalModel, LocalResult, OnText
from .outcomes import Answered, Escalated, Route
from .results import UsageView
from .turn import Turn, plan_view


def streaming(turn: Turn) -> OnText:
    """`LocalModel`'s `on_text`: each batch of pieces becomes a TokenEvent."""

    async def hear(piece: str, thinking: bool) -> None:
        await turn.events(TokenEvent(text=piece, thinking=thinking))

    return hear


async def local_round(
    model: LocalModel, turn: Turn, tools: list[ToolSpec], peer_id: str, limits: Limits
) -> LocalResult:
    """One round of the phone's model on the turn's prompt (the request with its
    documents after the conversation so far); without tools, a plain answer."""
    request = turn.request
    inert = await model.inert()  # the common markers and the phone's model's own tokens
    return await model.plan(
        turn.prompt.local_text(inert),
        tools,
        peer_id,
        limits=limits,
        mode=request.tool_choice if tools else "none",
        cancelled=turn.cancel.is_set,
        thinking=request.thinking,
        history=turn.prompt.earlier(Destination.PHONE, inert),
        on_text=streaming(turn),
        settings=request.generation,
        now=turn.now,
    )


async def answer_locally(
    model: LocalModel,
    turn: Turn,
    tools: list[ToolSpec],
    route: Route,
    limits: Limits,
    *,
    threshold: float | None = None,
) -> Answered | Escalated:
    """Plan on the phone and run the plan. With a `threshold` (the router may still
    escalate) a low-confidence answer, or a plan whose every step failed, is
    `Escalated` instead."""
    result = await local_round(model, turn, tools, route.planner, limits)
    if threshold is not None and result.confidence is not None and result.confidence < threshold:
        return Escalated(
            f"the local model's confidence {result.confidence:.2f} is below the policy's "
            f"{threshold:.2f}"
        )
    await turn.announce_route(route, route.planner)
    answered = Answered(
        route=route,
        answer=result.answer,
        documents=tuple(
            DocumentProgress(turn.prompt.documents, [False] * len(turn.prompt.documents)).views()
        ),
        thinking=result.thinking,
        confidence=None if result.confidence is None else round(result.confidence, 4),
        usage=UsageView.of(result.usage),
        finish="length" if result.truncated else "stop",
        input=turn.prompt.labels(Destination.PHONE),
        labels=turn.prompt.labels(Destination.PHONE),
        untrusted_sources=turn.prompt.labels(Destination.PHONE).untrusted,  # what it read
    )
    if result.plan is None:
        return answered
    ran = await turn.execute(result.plan, turn.session(Destination.PHONE), Destination.PHONE)
    failed = [o for o in ran.observations if o.status == "error"]
    if threshold is not None and failed and len(failed) == len(ran.observations):
        return Escalated(
            "every local tool call failed (" + "; ".join(o.error or "" for o in failed)[:200] + ")"
        )
    done = sum(o.status == "ok" for o in ran.observations)
    return dataclasses.replace(
        answered,
        answer=answered.answer or f"Ran {done} of {len(ran.observations)} step(s) on the phone.",
        plans=(plan_view(result.plan, ran.observations),),
        labels=answered.labels | ran.read,
        steps=tuple(ran.steps.items()),
        untrusted_sources=answered.untrusted_sources | ran.tainted_by,
    )
