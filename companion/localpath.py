"""The local path: the phone's own model plans (or answers), the executor runs the plan.

Nothing leaves the phone on this path, so earlier turns are shown to the model
whole, and plan results are shown to the user unredacted.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Limits, ToolSpec

from .documents import DocumentProgress
from .egress import Destination
from .events import TokenEvent
from .executor import SessionState
from .local import LocalModel, LocalResult
from .results import UsageView
from .turn import Turn, plan_view


def streaming(turn: Turn) -> Callable[[str, bool], None]:
    """`LocalModel`'s `on_text`: each piece becomes a TokenEvent (from the model's thread)."""

    async def tell(event: TokenEvent) -> None:
        await turn.events(event)

    def hear(piece: str, thinking: bool) -> None:
        anyio.from_thread.run(tell, TokenEvent(text=piece, thinking=thinking))

    return hear


async def local_plan(
    model: LocalModel,
    turn: Turn,
    tools: list[ToolSpec],
    peer_id: str,
    limits: Limits,
    *,
    text: str | None,
) -> LocalResult:
    """One round of the phone's model on `text` after the conversation so far (no
    `text`: the conversation is the prompt); without tools, a plain answer."""
    request = turn.request
    if text is not None and turn.documents:  # the phone's own model may read them all
        text = "\n\n".join([text, *(f"Attached {d.name}:\n{d.text}" for d in turn.documents)])
    return await model.plan(
        text,
        tools,
        peer_id,
        limits=limits,
        mode=request.tool_choice if tools else "none",
        cancelled=turn.cancel.is_set,
        thinking=request.thinking,
        history=turn.history[Destination.PHONE],
        on_text=streaming(turn),
        settings=request.generation,
    )


async def answer_locally(
    model: LocalModel,
    turn: Turn,
    tools: list[ToolSpec],
    peer_id: str,
    limits: Limits,
    *,
    reason: str,
    threshold: float | None = None,
) -> None:
    """Plan on the phone and run the plan; fills `turn.result`. With a `threshold`
    (the router may still escalate) a low-confidence answer, or a plan whose every step
    failed, raises `plan_rejected` instead."""
    result = await local_plan(model, turn, tools, peer_id, limits, text=turn.request.text)
    out = turn.result
    if threshold is not None and result.confidence is not None and result.confidence < threshold:
        raise HearthError(
            ErrorCode.PLAN_REJECTED,
            f"the local model's confidence {result.confidence:.2f} is below the policy's "
            f"{threshold:.2f}",
        )
    out.route, out.reason, out.planner = "local", reason, peer_id
    out.documents = DocumentProgress(turn.documents, [False] * len(turn.documents)).views()
    if result.confidence is not None:
        out.confidence = round(result.confidence, 4)
    await turn.announce_route(peer_id)
    out.answer = result.answer
    out.usage = UsageView.of(result.usage)
    out.finish = "length" if result.truncated else "stop"
    if turn.request.thinking:
        out.thinking = result.thinking
    if result.plan is not None:
        observations = await turn.execute(result.plan, SessionState(), Destination.PHONE)
        failed = [o for o in observations if o.status == "error"]
        if threshold is not None and failed and len(failed) == len(observations):
            raise HearthError(
                ErrorCode.PLAN_REJECTED,
                "every local tool call failed ("
                + "; ".join(o.error or "" for o in failed)[:200]
                + ")",
            )
        out.plans = [plan_view(result.plan, observations)]
        out.plan = out.plans[0]
        if not out.answer:
            done = sum(o.status == "ok" for o in observations)
            out.answer = f"Ran {done} of {len(observations)} step(s) on the phone."
    out.timings["total_ms"] = turn.elapsed_ms()
