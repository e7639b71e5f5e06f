"""The phone's side of a plan session on `/hearth/plan/1`.

Sends the request, streams tokens to the caller, opens each signed plan against
what the session binds it to, hands it to the caller's executor, and sends back the
observations, until `Final`. The node's errors arrive as typed `HearthError`s;
`cancel` sends a `Cancel` and ends the session.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import DEFAULT_MAX_FRAME, FrameError, encode_body
from hearth.protocol.wire.messages import (
    ActionPlan,
    Cancel,
    ErrorFrame,
    Final,
    Message,
    Observation,
    Observations,
    Plan,
    PlanRequest,
    Progress,
    Token,
    ToolSpec,
)
from hearth.protocol.wire.plans import Expected, open_plan
from hearth.protocol.wire.session import ENDED, PlanSession, Side

from .streams import FrameStream
from .taskgroups import single_error

PLAN_PROTOCOL = "/hearth/plan/1"
Execute = Callable[[Plan], Awaitable[list[Observation]]]
Offer = Callable[[list[Observation]], list[ToolSpec]]
"""The tools to offer from the next round on, given a round's observations."""
OnToken = Callable[[Token], Awaitable[None]]
OnProgress = Callable[[Progress], Awaitable[None]]


@dataclass
class PlanOutcome:
    """What a finished session produced."""

    final: Final
    plans: list[Plan] = field(default_factory=list)
    tokens: int = 0
    first_token_s: float | None = None


async def _no_tokens(_: Token) -> None:
    return None


async def _no_progress(_: Progress) -> None:
    return None


def end_of(event: Message | FrameError, when: str = "") -> None:
    """Raise what `event` means if it ends the session: the node's error or cancel, or a
    bad frame; `when` says what the phone was doing then."""
    at = f" {when}" if when else ""
    if isinstance(event, FrameError):
        raise HearthError(event.error.code, f"{event.error.message}{at}")
    if isinstance(event, ErrorFrame):
        message = f"the node ended the session{at}: {event.message}" if at else event.message
        raise HearthError(event.code, message, retry_after=event.retry_after)
    if isinstance(event, Cancel):
        raise HearthError(
            ErrorCode.CANCELLED, f"the node cancelled the session{at}: {event.reason}"
        )


async def run_plan_session(
    stream: FrameStream,
    request: PlanRequest,
    *,
    phone_id: str,
    execute: Execute,
    on_token: OnToken = _no_tokens,
    on_progress: OnProgress = _no_progress,
    cancel: anyio.Event | None = None,
    seen_plans: set[str] | None = None,
    offer: Offer | None = None,
) -> PlanOutcome:
    """Run one plan session with the node at the other end of `stream`; `offer` names
    the tools each round's observations bring to the next rounds.

    The stream is read all the time, also while a plan executes: whatever the node
    says meanwhile (an error, a cancel, a bad frame, the stream closing) ends the
    session at once, and the running step is cancelled (the executor's own concern
    is what a cut-off step leaves behind).
    """
    session = PlanSession(Side.PHONE, stream.max_frame)
    seen = seen_plans if seen_plans is not None else set()
    started = time.monotonic()
    outcome = PlanOutcome(final=Final(request_id=request.request_id, answer=""))
    done = False
    inbox_send, inbox = anyio.create_memory_object_stream[Message | FrameError](256)
    await stream.write(session.send(request))

    async def read() -> None:
        async with inbox_send:
            while True:
                data = await stream.read_some()
                for event in session.receive_data(data) if data else session.receive_eof():
                    await inbox_send.send(event)
                if not data:
                    return

    async def execute_watching(plan: Plan) -> list[Observation]:
        """`execute(plan)`, cut short by the first frame the node sends meanwhile (in
        EXECUTING it may only end the session)."""
        results: list[Observation] | None = None
        ended: Message | FrameError | None = None
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                nonlocal results
                results = await execute(plan)
                tg.cancel_scope.cancel()

            tg.start_soon(run)
            try:
                ended = await inbox.receive()
            except anyio.EndOfStream:
                ended = FrameError(HearthError(ErrorCode.UNREACHABLE, "the node went away"), True)
            tg.cancel_scope.cancel()
        if ended is not None:
            end_of(ended, "while a step ran")
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "the node sent a frame while a step ran")
        assert results is not None
        return results

    async def converse() -> None:
        nonlocal done
        async for event in inbox:
            end_of(event)
            if isinstance(event, Token):
                outcome.tokens += 1
                if outcome.first_token_s is None:
                    outcome.first_token_s = time.monotonic() - started
                await on_token(event)
            elif isinstance(event, Progress):  # what the node is doing (reading a document…)
                await on_progress(event)
            elif isinstance(event, ActionPlan):
                expected = Expected(
                    signer=stream.peer_id,
                    audience=phone_id,
                    session_id=request.request_id,
                    round=session.round,
                    request_hash=session.request_hash or b"",
                    transcript_hash=session.transcript_at_plan or b"",
                )
                plan = open_plan(event.plan, expected, now=time.time(), seen=seen)
                seen.add(plan.plan_id)
                outcome.plans.append(plan)
                results = await execute_watching(plan)
                if session.state in ENDED:
                    continue  # the node ended it as the plan finished: its frame comes next
                await stream.write(
                    session.send(
                        within_a_frame(
                            Observations(
                                request_id=request.request_id,
                                plan_id=plan.plan_id,
                                round=session.round,
                                results=results,
                                tools=offer(results) if offer is not None else [],
                            )
                        )
                    )
                )
            elif isinstance(event, Final):
                outcome.final = event
                done = True
                return
        raise HearthError(ErrorCode.UNREACHABLE, "the node closed the session")

    async def watch_cancel(scope: anyio.CancelScope) -> None:
        assert cancel is not None
        await cancel.wait()
        await stream.write(
            session.send(Cancel(request_id=request.request_id, reason="cancelled by the user"))
        )
        scope.cancel()

    with single_error():
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            if cancel is not None:
                tg.start_soon(watch_cancel, tg.cancel_scope)
            await converse()
            tg.cancel_scope.cancel()
    if not done:
        raise HearthError(ErrorCode.CANCELLED, "plan session cancelled")
    return outcome


def within_a_frame(observations: Observations, max_frame: int = DEFAULT_MAX_FRAME) -> Observations:
    """`observations` as they fit one frame: the largest results, one at a time, are
    replaced by a note of their size (the steps ran and stay as they were; their results
    stay on the phone), so a round of large tool results does not end the session."""
    results = list(observations.results)
    sizes: list[int] = []  # each result's share, measured only when the frame is too large
    while len(encode_body(observations.model_copy(update={"results": results}))) > max_frame:
        sizes = sizes or [
            len(encode_body(observations.model_copy(update={"results": [r]}))) for r in results
        ]
        largest = max(range(len(results)), key=sizes.__getitem__)
        if sizes[largest] == 0:
            break  # nothing left to take out: the frame is refused as before, typed
        note = f"(a result of {sizes[largest]} bytes, too large to send: left on the phone)"
        results[largest] = results[largest].model_copy(update={"result": note, "error": None})
        sizes[largest] = 0
    return observations.model_copy(update={"results": results})
