"""Plan sessions on `/hearth/plan/1`: the node plans, the phone executes.

A round renders the conversation (a continuation after the first), generates under
a grammar built from the phone's tool schemas while streaming tokens, parses and
validates every tool call, and sends a signed `ActionPlan` bound to the phone, the
session, the round, the request and the transcript; the phone's observations
start the next round (with the tools they offer from then on), until the model answers
in text (`Final`, naming what the node read itself: its own tools' results, the
documents) or the limits force it to. The node never executes a phone tool; an invalid
plan is never sent.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hearth.protocol.kit.request_log import Logged, logged
from hearth.protocol.model.chat import stated_time
from hearth.protocol.model.grammar import Mode, answer_grammar, tool_grammar
from hearth.protocol.model.inert import Inert
from hearth.protocol.model.limits import answer_tokens, requested
from hearth.protocol.model.runtime import Generation, Sampling
from hearth.protocol.model.toolcalls import Parsed, parse_generation
from hearth.protocol.model.validate import check_schemas, validate_calls
from hearth.protocol.transport.plans import PLAN_PROTOCOL
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import FrameError
from hearth.protocol.wire.identity import sign
from hearth.protocol.wire.messages import (
    MAX_UNTRUSTED_INPUTS,
    ActionPlan,
    AnswerSettings,
    Cancel,
    ChatMessage,
    Final,
    Limits,
    Message,
    Observations,
    Plan,
    PlanRequest,
    PlanStep,
    Progress,
    Signed,
    Token,
    ToolSpec,
    UntrustedInput,
    Usage,
    error_frame,
)
from hearth.protocol.wire.roster import Role, Roster
from hearth.protocol.wire.session import ENDED, PlanSession, Side

from .admission import Admission
from .backends import Backend, Conversation, GenerationSettings, OnText, ignore_text
from .config import FriendCaps
from .documents import DocumentReader, Reading, inert_for

log = logging.getLogger("hearth.planner")


class NodeTool(Protocol):
    """A tool the node runs itself while planning (`web_search`); never a phone tool."""

    spec: ToolSpec

    def available(self) -> bool: ...

    async def run(self, arguments: dict[str, Any]) -> tuple[Any, UntrustedInput | None]: ...


@dataclass
class PlannerSettings:
    plan_ttl_s: float = 300.0
    observation_timeout_s: float = 120.0
    request_timeout_s: float = 30.0  # a stream that sends no whole request by then is closed
    plan_for_friends: bool = False  # for phones whose home is another node (config)
    friend_caps: FriendCaps = field(default_factory=FriendCaps)  # what one such request gets
    sampling: Sampling = field(default_factory=Sampling)  # from the node's configuration


def tool_message(call_id: str, content: Any, inert: Inert) -> ChatMessage:
    """A tool's result for the conversation: JSON whose chat-template markers are broken
    (a web page or a message body is read as text, never as a turn or a call)."""
    return ChatMessage(role="tool", tool_call_id=call_id, content=inert(json.dumps(content)))


def conversation_messages(request: PlanRequest, inert: Inert) -> list[ChatMessage]:
    """The request's conversation for the model: every earlier message inert (history is
    read as text, never as a turn or a call), the request itself as the user wrote it."""
    messages = request.conversation
    inert_earlier = (m.model_copy(update={"content": inert(m.content)}) for m in messages[:-1])
    return [*inert_earlier, *messages[-1:]]


def sign_plan(plan: Plan, key: Ed25519PrivateKey) -> Signed:
    payload: bytes = msgpack.packb(plan.model_dump(mode="python"), use_bin_type=True)
    return Signed(payload=payload, signature=sign(key, "plan", payload))


@dataclass(frozen=True)
class RoundSettings:
    """What one round may do: call tools (`mode`, at most `max_calls`), within the
    request's `limits`, with an app's `generation` settings (a JSON answer, say)."""

    mode: Mode
    max_calls: int
    limits: Limits
    generation: AnswerSettings | None = None


async def model_round(
    backend: Backend,
    conv: Conversation,
    schemas: dict[str, dict[str, Any]],
    round_: RoundSettings,
    settings: GenerationSettings,
    *,
    on_text: OnText = ignore_text,
    on_thinking: OnText = ignore_text,
    cancel: anyio.Event | None = None,
) -> tuple[Generation, Parsed]:
    """One round of the model on `conv`: generated under the grammar of the tools it may
    call (or the answer's), parsed in the model's call format and every call validated
    against `schemas` (a call that breaks its schema raises, typed)."""
    calls = tool_grammar(
        schemas,
        round_.mode,
        max_calls=round_.max_calls,
        max_value_chars=round_.limits.max_value_chars,
        call_format=backend.call_format,
    )
    result = await backend.generate(
        conv,
        grammar=calls or answer_grammar(round_.generation),
        settings=settings,
        on_text=on_text,
        on_thinking=on_thinking,
        cancel=cancel or anyio.Event(),
    )
    if result.finish == "cancelled":
        raise HearthError(ErrorCode.CANCELLED, "plan session cancelled")
    parsed = parse_generation(
        result.text,
        result.finish,
        schemas,
        calls=calls is not None,
        thinking=conv.thinking,
        call_format=backend.call_format,
    )
    await validate_calls(parsed.calls, schemas)
    return result, parsed


class Planner:
    """Serves plan sessions with one backend, one identity and one admission queue."""

    def __init__(
        self,
        key: Ed25519PrivateKey,
        peer_id: str,
        backend: Backend | None,
        admission: Admission,
        settings: PlannerSettings,
        roster: Callable[[], Roster],
    ) -> None:
        self.key = key
        self.roster = roster  # the roster in force now
        self.peer_id = peer_id
        self.backend = backend
        self.admission = admission
        self.settings = settings
        self.sessions = 0
        self.shutdown = anyio.Event()
        self.node_tools: dict[str, NodeTool] = {}

    async def serve(self, stream: FrameStream) -> None:
        """One plan session on `stream` (the handler of `/hearth/plan/1`)."""
        run = _Session(self, stream)
        self.sessions += 1
        try:
            with logged(run.logged):
                await run.main()
        finally:
            self.sessions -= 1


class _Session:
    def __init__(self, planner: Planner, stream: FrameStream) -> None:
        self.planner = planner
        self.stream = stream
        self.session = PlanSession(Side.NODE, stream.max_frame)
        self.inbox_send, self.inbox = anyio.create_memory_object_stream[Message | FrameError](64)
        self.cancel = anyio.Event()
        self.failed = False
        self.logged = Logged(PLAN_PROTOCOL)  # its line in the request log

    async def send(self, message: Message) -> None:
        if self.session.state not in ENDED:
            await self.stream.write(self.session.send(message))

    async def main(self) -> None:
        with single_error():
            await self._main()

    async def _main(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read)
            tg.start_soon(self._watch_shutdown, tg.cancel_scope)
            try:
                with single_error():
                    await self._run()
            except HearthError as exc:
                await self._fail(exc)
            except Exception:
                trace = uuid.uuid4().hex[:8]
                log.exception("plan session failed (trace %s)", trace)
                await self._fail(HearthError(ErrorCode.INTERNAL, f"internal error (trace {trace})"))
            tg.cancel_scope.cancel()

    async def _fail(self, exc: HearthError) -> None:
        if self.failed:
            return
        self.failed = True
        self.logged.outcome = exc.code.value
        # said even when the phone's bad frame already ended the session (and only once)
        if self.session.state in ENDED:
            with contextlib.suppress(HearthError):  # the phone may be gone
                await self.stream.send(error_frame(exc, self.session.request_id))
            return
        with contextlib.suppress(HearthError):
            await self.send(error_frame(exc, self.session.request_id))

    async def _watch_shutdown(self, scope: anyio.CancelScope) -> None:
        """On shutdown: stop generating, tell the phone `cancelled`, end the session."""
        await self.planner.shutdown.wait()
        self.cancel.set()
        await anyio.sleep(0.2)  # a generating round stops within a token and reports itself
        await self._fail(HearthError(ErrorCode.CANCELLED, "the node is shutting down"))
        scope.cancel()

    async def _read(self) -> None:
        """Feed the phone's bytes to the session; a Cancel or EOF cancels generation."""
        async with self.inbox_send:
            while True:
                data = await self.stream.read_some()
                events = self.session.receive_data(data) if data else self.session.receive_eof()
                for event in events:
                    if isinstance(event, Cancel) or (isinstance(event, FrameError) and event.fatal):
                        self.cancel.set()
                    await self.inbox_send.send(event)
                if not data:
                    self.cancel.set()
                    return

    async def _next(self, timeout: float, what: str) -> Message:
        with anyio.fail_after(timeout):
            try:
                event = await self.inbox.receive()
            except anyio.EndOfStream as exc:
                raise HearthError(ErrorCode.UNREACHABLE, "the phone closed the session") from exc
        if isinstance(event, FrameError):
            raise event.error
        if isinstance(event, Cancel):
            raise HearthError(ErrorCode.CANCELLED, "cancelled by the phone")
        return event

    async def _run(self) -> None:
        try:
            request = await self._next(self.planner.settings.request_timeout_s, "request")
        except TimeoutError as exc:
            raise HearthError(
                ErrorCode.TIMED_OUT,
                f"no plan request within {self.planner.settings.request_timeout_s:g} s",
            ) from exc
        assert isinstance(request, PlanRequest)  # the session allows nothing else first
        self.logged.id = request.request_id
        friend = self._for_a_friend()
        self.logged.route = f"{PLAN_PROTOCOL} for {'a friend' if friend else 'a phone'}"
        if friend and request.documents:  # the owner's documents never go to a friend
            raise HearthError(ErrorCode.REFUSED, "this node reads no documents for friends")
        if friend:
            request = await self._within_friend_caps(request)
        backend = self.planner.backend
        if backend is None:
            raise HearthError(ErrorCode.MODEL_NOT_LOADED, "this node serves no model")
        schemas = {t.function.name: dict(t.function.parameters) for t in request.tools}
        check_schemas(schemas)
        admission = self.planner.admission
        peer = self.stream.peer_id
        async with admission.friend_slot(peer) if friend else admission.slot(peer):
            try:
                with anyio.fail_after(request.limits.deadline_s):
                    await self._rounds(request, backend, schemas)
            except TimeoutError as exc:
                raise HearthError(
                    ErrorCode.TIMED_OUT, f"plan deadline of {request.limits.deadline_s:g} s passed"
                ) from exc

    async def _within_friend_caps(self, request: PlanRequest) -> PlanRequest:
        """A friend's request with its limits cut to this node's `[friends]` caps (the
        deadline bounds how long it holds the friends' slot); the phone is told what was
        cut. Tighter limits are within the phone's own: it still holds the planner to them."""
        caps = self.planner.settings.friend_caps
        cut = {
            name: cap
            for name, cap in caps.model_dump(exclude={"per_phone"}).items()
            if getattr(request.limits, name) > cap
        }
        if not cut:
            return request
        said = ", ".join(f"{name} {value:g}" for name, value in cut.items())
        await self.send(
            Progress(
                request_id=request.request_id,
                stage="limits",
                detail=f"this node plans for friends within {said}",
            )
        )
        return request.model_copy(update={"limits": request.limits.model_copy(update=cut)})

    def _for_a_friend(self) -> bool:
        """Whether the phone is a friend's: this node did not found the swarm (only the
        founder pairs phones; a `home` role granted in the roster does not make a friend's
        node anyone's home, so its own `plan_for_friends` holds). Refused unless this
        node plans for friends and holds the planner role."""
        roster = self.planner.roster()
        if roster.founder == self.planner.peer_id:
            return False
        roles = roster.roles_of(self.planner.peer_id, time.time())
        if not self.planner.settings.plan_for_friends:
            raise HearthError(
                ErrorCode.REFUSED, "this node does not plan for friends (plan_for_friends = false)"
            )
        if Role.PLANNER not in roles:
            raise HearthError(ErrorCode.REFUSED, "this node holds no planner role in the roster")
        return True

    async def _rounds(
        self, request: PlanRequest, backend: Backend, schemas: dict[str, dict[str, Any]]
    ) -> None:
        node_tools = {
            name: tool
            for name, tool in self.planner.node_tools.items()
            if name not in schemas and tool.available()
        }
        tools = [*request.tools, *(t.spec for t in node_tools.values())]
        schemas = {t.function.name: dict(t.function.parameters) for t in tools}
        inert = inert_for(backend)
        conv = Conversation(
            messages=conversation_messages(request, inert),
            tools=tools,
            thinking=request.thinking,
            thinking_budget=request.limits.max_thinking_tokens,
            scope=self.stream.peer_id,
            now=stated_time(request.device.local_time, request.device.timezone),
        )
        untrusted: list[UntrustedInput] = []
        if request.documents:  # before the request itself, as the user attached them
            reading = await self._read_documents(request, backend, conv)
            conv.messages[-1:-1] = reading.messages()
            untrusted += reading.untrusted()
        settings = GenerationSettings(  # the app's sampling, within this request's limits
            answer_tokens(request.limits.max_tokens, request.generation),
            requested(self.planner.settings.sampling, request.generation),
        )
        usage = Usage()
        steps_left = request.limits.max_steps
        for round_no in range(1, request.limits.max_rounds + 1):
            last = round_no == request.limits.max_rounds or steps_left == 0
            mode: Mode = "none" if last else request.tool_choice if round_no == 1 else "auto"
            await self.send(
                Progress(
                    request_id=request.request_id, stage="planning", detail=f"round {round_no}"
                )
            )

            async def stream_text(piece: str) -> None:
                await self.send(Token(request_id=request.request_id, text=piece))

            async def stream_thought(piece: str) -> None:  # progress, never a call
                await self.send(Token(request_id=request.request_id, text=piece, thinking=True))

            result, parsed = await model_round(
                backend,
                conv,
                schemas,
                RoundSettings(mode, max(1, steps_left), request.limits, request.generation),
                settings,
                on_text=stream_text,
                on_thinking=stream_thought,
                cancel=self.cancel,
            )
            usage += Usage(
                prompt_tokens=result.prompt_counted, completion_tokens=result.completion_counted
            )
            conv.messages.append(ChatMessage(role="assistant", content=result.text))
            if not parsed.calls:
                await self.send(
                    Final(
                        request_id=request.request_id,
                        answer=parsed.text,
                        rounds=round_no - 1,
                        usage=usage,
                        finish="length" if parsed.truncated else "stop",
                        untrusted_inputs=untrusted[:MAX_UNTRUSTED_INPUTS],
                    )
                )
                return
            steps_left -= len(parsed.calls)
            for i, call in enumerate((c for c in parsed.calls if c.name in node_tools), 1):
                content, source = await node_tools[call.name].run(call.arguments)
                untrusted += [source] if source is not None else []
                conv.messages.append(tool_message(f"n{i}", content, inert))
            phone_calls = [c for c in parsed.calls if c.name not in node_tools]
            if not phone_calls:  # the node's own tools answered: plan on
                continue
            plan = await self._send_plan(
                request,
                round_no,
                [
                    PlanStep(id=f"s{i}", tool=c.name, arguments=c.arguments)
                    for i, c in enumerate(phone_calls, 1)
                ],
                untrusted,
            )
            observed = await self._next(self.planner.settings.observation_timeout_s, "observations")
            assert isinstance(observed, Observations)
            if observed.plan_id != plan.plan_id:
                raise HearthError(ErrorCode.PROTOCOL_ERROR, "observations for another plan")
            self._offer(observed.tools, conv, schemas)
            for obs in observed.results:
                content = (
                    obs.result if obs.status == "ok" else {"status": obs.status, "error": obs.error}
                )
                conv.messages.append(tool_message(obs.step_id, content, inert))

    @staticmethod
    def _offer(
        offered: list[ToolSpec], conv: Conversation, schemas: dict[str, dict[str, Any]]
    ) -> None:
        """Tools the phone offers from the next round on (what the rounds so far showed
        points to), added to the conversation's tools and the `schemas` calls are checked
        against; a name already offered (the request's, the node's own) is not replaced.
        The tools block changed: the backend renders the context anew."""
        added = {t.function.name: t for t in offered if t.function.name not in schemas}
        if not added:
            return
        more = {name: dict(t.function.parameters) for name, t in added.items()}
        check_schemas(more)
        conv.tools = [*conv.tools, *added.values()]
        conv.memory = None
        schemas.update(more)

    async def _read_documents(
        self, request: PlanRequest, backend: Backend, conv: Conversation
    ) -> Reading:
        """Read the request's documents, telling the phone each chunk as it is read."""

        async def on_chunk(stage: str, document: int, chunk: int, chunks: int) -> None:
            await self.send(
                Progress(
                    request_id=request.request_id,
                    stage=stage,
                    detail=request.documents[document].name,
                    document=document,
                    chunk=chunk,
                    chunks=chunks,
                )
            )

        reader = DocumentReader(
            backend, self.planner.settings.sampling, self.cancel, on_chunk, scope=conv.scope
        )
        room = reader.room(request.limits, conv, len(request.documents))
        return await reader.read(request.documents, room)

    async def _send_plan(
        self,
        request: PlanRequest,
        round_no: int,
        steps: list[PlanStep],
        untrusted: list[UntrustedInput],
    ) -> Plan:
        assert self.session.request_hash is not None
        now = time.time()
        plan = Plan(
            plan_id=uuid.uuid4().hex,
            signer=self.planner.peer_id,
            audience=self.stream.peer_id,
            session_id=request.request_id,
            round=round_no,
            request_id=request.request_id,
            request_hash=self.session.request_hash,
            transcript_hash=self.session.transcript_hash,
            issued_at=now,
            expires_at=now + self.planner.settings.plan_ttl_s,
            steps=steps,
            untrusted_inputs=untrusted[:MAX_UNTRUSTED_INPUTS],
        )
        await self.send(
            ActionPlan(request_id=request.request_id, plan=sign_plan(plan, self.planner.key))
        )
        return plan
