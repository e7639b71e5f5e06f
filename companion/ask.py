"""One request, from the door to its kept result.

`ask` is what every door calls to ask (the command line in-process, companion.sock, the
HTTP API, the Python API): it opens the request's turn in its conversation, builds its
prompt (`prompt.build`), has the asker run the route plan (`asker.Asker`), and keeps the
one result, with its labels, in the conversation. `deliver_kept` sends what waits for the
home node once the link is back, each answer kept the same way.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .asker import Asker
from .confirm import Confirmer, Scripted
from .conversations import TurnLabels
from .documents import Document, read_documents
from .events import AskRequest, EventSink, discard
from .executor import Executor
from .inbox import Kept, NotSent, deliver
from .outcomes import Answered, Asked, Route, ask_result
from .prompt import build
from .results import AskResult
from .tools.builtin.device import device_context
from .turn import Turn

if TYPE_CHECKING:
    from .link import NodeLink
    from .service import Service


async def ask(
    service: Service,
    request: AskRequest,
    events: EventSink,
    confirmer: Confirmer,
    cancel: anyio.Event,
) -> AskResult:
    """Route, plan, execute, answer; the turn is kept in its conversation."""
    if request.confirm != "ask":
        confirmer = Scripted(request.confirm == "yes")
    executor = service.executor(confirmer)
    # a plan another request left is resumed asking this one, never under its --yes
    await service.resume(confirmer if request.confirm == "ask" else Scripted(None))
    conversation_id = service.conversations.for_request(
        request.conversation_id, request.continue_last
    )
    documents = await attached(service, request.attachments)
    turn, turns = turn_of(
        service, request, uuid.uuid4().hex, conversation_id, events, cancel, executor, documents
    )
    turn.begun = begun = anyio.Event()
    unkept: list[Exception] = []  # keeping it failed (a full disk): the request fails so

    async def begin() -> None:  # the first token does not wait for the disk
        try:
            await anyio.to_thread.run_sync(
                service.conversations.begin,
                conversation_id,
                turn.request_id,
                request.text,
                request.source,
            )
        except Exception as exc:
            unkept.append(exc)
            tasks.cancel_scope.cancel()
        finally:
            begun.set()

    with single_error():
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(begin)
            try:
                answered, link = await Asker(service, turn, conversation_id).answer(turns)
            except BaseException as exc:  # an error, or cancelled: the request is kept, failed
                await failed(service, turn, exc)
                raise
    if unkept:
        raise unkept[0]
    asked = Asked(
        request_id=turn.request_id,
        conversation_id=conversation_id,
        served_by="companion" if service.resident else "process",
        warnings=[*service.warnings, *turn.warnings],
        node=link.node,
        connect_ms=link.connect_ms,
    )
    return kept_result(service, turn, answered, asked)


async def failed(service: Service, turn: Turn, exc: BaseException) -> None:
    """Keep why the request ended without an answer, once it is kept as started."""
    why = f"{exc.code.value}: {exc.message}" if isinstance(exc, HearthError) else "stopped"
    with anyio.CancelScope(shield=True):
        await turn.started()
    with contextlib.suppress(sqlite3.Error):  # a full disk: left `running`, so the
        service.conversations.failed(  # next start: `interrupted`
            turn.request_id, why, tuple(turn.out_after_private)
        )


def turn_of(
    service: Service,
    request: AskRequest,
    request_id: str,
    conversation_id: str | None,
    events: EventSink,
    cancel: anyio.Event,
    executor: Executor,
    documents: list[Document],
    asked_at: float | None = None,
) -> tuple[Turn, int]:
    """The turn of `request`, its prompt built from the earlier turns of its
    conversation (or the app's own history); with the conversation's length. The
    phone's time it carries is when it was asked (`asked_at`: a kept request's)."""
    earlier = [] if conversation_id is None else service.conversations.turns(conversation_id)
    prompt = build(
        request,
        earlier,
        documents,
        executor.egress,
        text=request.text,
        max_turns=service.settings.history_turns,
        max_chars=service.settings.history_chars,
    )
    given = sum(m.role == "user" for m in request.history)
    device = device_context(service.clock, asked_at)
    turn = Turn(request, request_id, events, cancel, executor, prompt, device)
    return turn, (given or len(earlier)) + 1


def kept_result(service: Service, turn: Turn, answered: Answered, asked: Asked) -> AskResult:
    """The request's one result; the turn kept in its conversation with its labels."""
    result = ask_result(asked, answered, turn.request.thinking, turn.elapsed_ms())
    if asked.conversation_id is not None:
        steps = dict(answered.steps)
        planned_at = answered.route.planned_at
        service.conversations.append(
            asked.conversation_id,
            turn.request.text,
            result,
            {key for key, labels in steps.items() if labels.private},
            TurnLabels(
                input=answered.input,
                answer=answered.labels,
                steps=steps,
                planned_at=planned_at,
                out_after_private=tuple(
                    dict.fromkeys([*turn.prompt.out_after_private, *turn.out_after_private])
                ),
            ),
            turn.request.source,
        )
    return result


async def attached(service: Service, paths: list[str]) -> list[Document]:
    """The request's attachments, read on the phone; never a file of the home itself
    (its keys, tokens and databases are not documents)."""
    home = service.home.resolve()
    for path in paths:
        if Path(path).expanduser().resolve().is_relative_to(home):
            raise HearthError(
                ErrorCode.INVALID_INPUT, f"cannot attach {path}: it is part of the home"
            )
    files = [Path(p).expanduser() for p in paths]
    return await read_documents(files, service.settings.documents)


async def deliver_kept(service: Service, link: NodeLink) -> None:
    """Send what waits for the home, now that the link is up; each answer goes into
    its conversation. Nobody is there to confirm: a step that needs it is refused."""

    async def send(kept: Kept) -> AskResult:
        if not link.connected:
            raise NotSent
        turn, _ = turn_of(
            service,
            kept.request,
            kept.request_id,
            kept.conversation_id,
            discard,
            anyio.Event(),
            service.executor(Scripted(None)),
            [],
            kept.since,  # "tomorrow" is the day after it was asked, not after it was sent
        )
        route = Route("remote", "sent when the home node came back", link.node)
        asker = Asker(service, turn, kept.conversation_id)
        answered = await asker.remotely(link, route)
        asked = Asked(
            request_id=kept.request_id,
            conversation_id=kept.conversation_id,
            served_by="companion",
            node=link.node,
        )
        return kept_result(service, turn, answered, asked)

    await deliver(service.inbox, send)
