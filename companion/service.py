"""The companion's engine: one phone home's tools, executor, models, link and conversations.

A one-shot `hearth` command opens a `Service` in its own process; `hearth serve`
opens one resident (the kept link to the home node, the warm local model) and serves
it to the `hearth` commands, the HTTP API and Python apps. `ask` routes a request,
plans it (on the home node, or on the phone's own model), runs every plan through
the executor, keeps the turn in its conversation and returns an `AskResult`,
telling its progress as events on the way.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import ValidationError

from hearth.protocol.kit.tomlfile import read_toml
from hearth.protocol.transport.keys import load_identity
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import (
    AnswerSettings,
    ChatMessage,
    DeviceContext,
    ToolSpec,
    Usage,
)

from .asker import Asker
from .audit import AuditLog
from .config import secure_home
from .confirm import Confirmer, Scripted
from .conversations import Conversations, TurnLabels
from .documents import Document, read_documents
from .egress import Destination, Policy
from .events import AskRequest, EventSink, discard
from .executor import Executor
from .formats import check_home
from .inbox import Inbox, Kept, NotSent, deliver
from .journal import Journal
from .local import LocalModel
from .localpath import local_plan
from .outcomes import Answered, Asked, Route, ask_result
from .policy import load_policy
from .prompt import build
from .results import (
    AskResult,
    AuditRecordView,
    AuditResult,
    ClientToolCall,
    Completion,
    NodeStatus,
    SearchHit,
    SearchResult,
    StatusResult,
    ToolsResult,
    UsageView,
    WarningView,
)
from .settings import load_settings
from .tools.builtin import read_device_status, register_builtin
from .tools.mcp import mounted, servers_of
from .tools.registry import Registry
from .tools.storage import PhoneData
from .turn import Turn

if TYPE_CHECKING:  # libp2p loads only when the home node is needed
    from hearth.search.hopstreams import HopStreams

    from .link import NodeLink

RETURNED = "returned to the app"


def device_context() -> DeviceContext:
    """What the phone says about itself (battery, network), where it can tell."""
    status = read_device_status()
    network = status["network"] if status["network"] in ("wifi", "cellular") else "unknown"
    return DeviceContext(
        battery=status["battery"] if isinstance(status["battery"], int) else None,
        charging=status["charging"] if isinstance(status["charging"], bool) else None,
        network=network,
        metered={"wifi": False, "cellular": True}.get(network),
    )


class Service:
    """Everything the companion does for one home directory."""

    def __init__(self, home: Path, *, resident: bool = False) -> None:
        secure_home(home)
        check_home(home)
        self.home = home
        self.resident = resident
        self.policy = load_policy(home)
        self.settings = load_settings(home)
        self.registry = Registry()
        register_builtin(self.registry, PhoneData(home / "data"))
        config = read_toml(home / "config.toml")
        self.mcp_servers = servers_of(config.get("mcp", []), str(home / "config.toml"))
        self.warnings: list[WarningView] = []
        self.journal = Journal(home / "journal.db")
        self.audit_log = AuditLog(home)
        self.conversations = Conversations(home / "conversations.db")
        self.inbox = Inbox(home, self.policy.wait_for_home_max_age_s)  # one per home: it sends
        self.local = LocalModel(Path(self.settings.model) if self.settings.model else None)
        self.link: NodeLink | None = None  # the kept link, when resident and paired
        self._search_streams: HopStreams | None = None  # kept on the kept link's host
        self._resumed = False

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, home: Path, *, resident: bool = False) -> AsyncIterator[Service]:
        """The service with its MCP servers mounted (started in parallel; those left out
        are in `warnings`). Resident: the interrupted plans are resumed now (nobody is
        there to confirm: a step that needs it is not rerun), the link to the home node
        is kept up and the local model loaded warm."""
        service = cls(home, resident=resident)
        async with contextlib.AsyncExitStack() as stack:
            warnings = await stack.enter_async_context(
                mounted(service.mcp_servers, service.registry, home / "logs")
            )
            service.warnings = [WarningView.model_validate(w.model_dump()) for w in warnings]
            if resident:  # the only process asking now: what is `running` was cut off
                service.conversations.interrupted()
                await service._resume(Scripted(None))
                if service.paired:
                    from .link import NodeLink

                    link = await stack.enter_async_context(
                        NodeLink.running(home, service.audit_log)
                    )
                    link.on_up = functools.partial(service._deliver, link)
                    service.link = link
                tasks = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(tasks.cancel_scope.cancel)  # on the way out, before the link stops
                tasks.start_soon(service._warm)
                if service.link is not None:
                    tasks.start_soon(service.link.keep)
            yield service

    @functools.cached_property
    def peer_id(self) -> str:
        """The phone's peer id (`invalid_input` when the home has no identity yet)."""
        return peer_id_of(load_identity(self.home))

    @property
    def paired(self) -> bool:
        return (self.home / "roster.signed").exists()

    def executor(self, confirmer: Confirmer) -> Executor:
        """An executor over the service's tools and journal, asking `confirmer`."""
        return Executor(
            self.registry,
            self.journal,
            self.audit_log,
            confirmer,
            Policy(
                private_to_home=self.policy.private_to_home,
                never_remote_tools=frozenset(self.policy.never_remote_tools),
            ),
        )

    async def _resume(self, confirmer: Confirmer) -> None:
        """Finish what a crash interrupted, once, before the first request."""
        if not self._resumed:
            self._resumed = True
            executor = self.executor(confirmer)
            await executor.resume()
            self.warnings += [
                WarningView(
                    source="journal",
                    tool=tool,
                    code="refused",
                    message=f"a {tool} step was interrupted by a crash and not run again: it "
                    "may or may not have happened (see `hearth audit`)",
                )
                for tool in executor.not_rerun
            ]

    async def _warm(self) -> None:
        with contextlib.suppress(HearthError):  # no local model: requests say so when it matters
            await self.local.runtime()

    @staticmethod
    def device() -> DeviceContext:
        """What the phone says about itself now."""
        return device_context()

    @contextlib.asynccontextmanager
    async def link_to_home(self) -> AsyncIterator[NodeLink]:
        """The link to the home node: the kept one, or one for this request."""
        if not self.paired:
            raise HearthError(ErrorCode.INVALID_INPUT, "not paired: run `hearth pair -`")
        if self.link is not None:
            yield self.link
            return
        from .link import NodeLink

        async with NodeLink.running(self.home, self.audit_log) as link:
            yield link

    # -- asking ---------------------------------------------------------------------

    async def ask(
        self, request: AskRequest, events: EventSink, confirmer: Confirmer, cancel: anyio.Event
    ) -> AskResult:
        """Route, plan, execute, answer; the turn is kept in its conversation."""
        if request.confirm != "ask":
            confirmer = Scripted(request.confirm == "yes")
        executor = self.executor(confirmer)
        await self._resume(confirmer)
        conversation_id = self.conversations.for_request(
            request.conversation_id, request.continue_last
        )
        documents = await self._attached(request.attachments)
        turn, turns = self._turn(
            request, uuid.uuid4().hex, conversation_id, events, cancel, executor, documents
        )
        self.conversations.begin(conversation_id, turn.request_id, request.text, request.source)
        try:
            answered, link = await Asker(self, turn, conversation_id).answer(turns)
        except BaseException as exc:  # an error, or cancelled: the request is kept, failed
            why = f"{exc.code.value}: {exc.message}" if isinstance(exc, HearthError) else "stopped"
            with contextlib.suppress(sqlite3.Error):  # a full disk: left `running`, so the
                self.conversations.failed(turn.request_id, why)  # next start: `interrupted`
            raise
        asked = Asked(
            request_id=turn.request_id,
            conversation_id=conversation_id,
            served_by="companion" if self.resident else "process",
            warnings=self.warnings,
            node=link.node,
            connect_ms=link.connect_ms,
        )
        return self._kept(turn, answered, asked)

    def _turn(
        self,
        request: AskRequest,
        request_id: str,
        conversation_id: str | None,
        events: EventSink,
        cancel: anyio.Event,
        executor: Executor,
        documents: list[Document],
    ) -> tuple[Turn, int]:
        """The turn of `request`, its prompt built from the earlier turns of its
        conversation (or the app's own history); with the conversation's length."""
        earlier = [] if conversation_id is None else self.conversations.turns(conversation_id)
        prompt = build(
            request,
            earlier,
            documents,
            executor.egress,
            text=request.text,
            max_turns=self.settings.history_turns,
            max_chars=self.settings.history_chars,
        )
        given = sum(m.role == "user" for m in request.history)
        turn = Turn(request, request_id, events, cancel, executor, prompt)
        return turn, (given or len(earlier)) + 1

    def _kept(self, turn: Turn, answered: Answered, asked: Asked) -> AskResult:
        """The request's one result; the turn kept in its conversation with its labels."""
        result = ask_result(asked, answered, turn.request.thinking, turn.elapsed_ms())
        if asked.conversation_id is not None:
            steps = dict(answered.steps)
            planned_at = answered.route.planned_at
            self.conversations.append(
                asked.conversation_id,
                turn.request.text,
                result,
                {key for key, labels in steps.items() if labels.private},
                TurnLabels(
                    input=answered.input,
                    answer=answered.labels,
                    steps=steps,
                    planned_at=planned_at,
                ),
                turn.request.source,
            )
        return result

    async def _attached(self, paths: list[str]) -> list[Document]:
        """The request's attachments, read on the phone; never a file of the home itself
        (its keys, tokens and databases are not documents)."""
        home = self.home.resolve()
        for path in paths:
            if Path(path).expanduser().resolve().is_relative_to(home):
                raise HearthError(
                    ErrorCode.INVALID_INPUT, f"cannot attach {path}: it is part of the home"
                )
        files = [Path(p).expanduser() for p in paths]
        return await read_documents(files, self.settings.documents)

    async def _deliver(self, link: NodeLink) -> None:
        """Send what waits for the home, now that the link is up; each answer goes into
        its conversation. Nobody is there to confirm: a step that needs it is refused."""

        async def send(kept: Kept) -> AskResult:
            if not link.connected:
                raise NotSent
            turn, _ = self._turn(
                kept.request,
                kept.request_id,
                kept.conversation_id,
                discard,
                anyio.Event(),
                self.executor(Scripted(None)),
                [],
            )
            route = Route("remote", "sent when the home node came back", link.node)
            asker = Asker(self, turn, kept.conversation_id)
            answered = await asker.remotely(link, route)
            asked = Asked(
                request_id=kept.request_id,
                conversation_id=kept.conversation_id,
                served_by="companion",
                node=link.node,
            )
            return self._kept(turn, answered, asked)

        await deliver(self.inbox, send)

    # -- an app's own tools -------------------------------------------------------------

    async def complete(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        route: Literal["auto", "local", "remote"],
        events: EventSink,
        cancel: anyio.Event,
        tool_choice: Literal["auto", "required", "none"] = "auto",
        generation: AnswerSettings | None = None,
        parallel_tool_calls: bool = True,
    ) -> Completion:
        """Plan with an app's own tools (an OpenAI client's) and return the calls for
        the app to run: nothing is executed on the phone. `auto` plans on the home node
        when it is reachable, else locally. Without `parallel_tool_calls`, at most one
        call comes back."""
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
        executor = self.executor(Scripted(None))
        turn = Turn(
            asked,
            uuid.uuid4().hex,
            events,
            cancel,
            executor,
            build(asked, [], [], executor.egress, text=text, max_turns=0, max_chars=0),
        )
        if route != "local" and self.paired:
            async with self.link_to_home() as link:
                if await link.ensure():
                    return await self._complete_remotely(link, turn, tools, parallel_tool_calls)
                if route == "remote":
                    raise link.error or HearthError(ErrorCode.UNREACHABLE, link.reason)
        limits = self.settings.limits
        if not parallel_tool_calls:
            limits = limits.model_copy(update={"max_steps": 1})
        result = await local_plan(self.local, turn, tools, self.peer_id, limits)
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

    async def _complete_remotely(
        self, link: NodeLink, turn: Turn, tools: list[ToolSpec], parallel_tool_calls: bool
    ) -> Completion:
        """One plan from the node, its calls returned; the node hears every step was
        `skipped` ("returned to the app") and writes no more plans (two rounds at most)."""
        from hearth.protocol.wire.messages import Observation

        from .remote import plan_session

        one = {} if parallel_tool_calls else {"max_steps": 1}
        request = turn.prompt.plan_request(
            Destination.HOME,
            request_id=turn.request_id,
            request=turn.request,
            tools=tools,
            limits=self.settings.limits.model_copy(update={"max_rounds": 2, **one}),
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

    # -- reporting ----------------------------------------------------------------------

    async def status(self) -> StatusResult:
        """`hearth status --json`: the paired nodes, reachable or not and why."""
        from hearth.protocol.wire.errors import reason_about

        out = StatusResult(peer_id=self.peer_id)
        if not self.paired:
            return out
        from hearth.protocol.transport.addressbook import AddressBook
        from hearth.protocol.transport.health import ask_health
        from hearth.protocol.wire.roster import Role

        async with self.link_to_home() as link:
            book = AddressBook(self.home)
            for member in link.roster.roster.members:
                if not ({Role.HOME, Role.PLANNER} & member.roles):
                    continue
                roles = sorted(role.value for role in member.roles)
                entry = NodeStatus(peer_id=member.peer_id, name=member.name, roles=roles)
                try:
                    t0 = time.monotonic()
                    health = await ask_health(link.host, member.peer_id, book.get(member.peer_id))
                    entry.latency_ms = round((time.monotonic() - t0) * 1000, 1)
                    entry.reachable = True
                    entry.relay = relay_name(link, link.host.worked.get(member.peer_id, ""))
                    if health.model is not None:
                        entry.model = health.model.model_dump(mode="json")
                except HearthError as exc:
                    entry.reason = reason_about(member.peer_id, exc)
                out.nodes.append(entry)
        return out

    async def search(self, query: str, hops: int = 2, limit: int = 10) -> SearchResult:
        """`hearth search`: a peer-routed search; onion keys come from the home node."""
        from hearth.protocol.transport.addressbook import AddressBook
        from hearth.search.onion import Directory
        from hearth.search.route import pull_directory, search

        async with self.link_to_home() as link:
            streams = self._streams_on(link) if link is self.link else None
            if not await link.ensure():
                raise link.error or HearthError(ErrorCode.UNREACHABLE, link.reason)
            directory = Directory()
            roster = link.roster.roster
            await pull_directory(
                link.host, link.node, directory, roster, AddressBook(self.home).get(link.node)
            )
            outcome = await search(
                link.host,
                directory.usable(roster, time.time()),
                roster,
                own_node=link.node,
                query=query,
                hops=hops,
                limit=limit,
                streams=streams,
            )
        return SearchResult(
            query=query,
            hops=outcome.hops,
            results=[SearchHit(**r.__dict__) for r in outcome.results],
            truncated=outcome.truncated,
            attempts=outcome.attempts,
        )

    def _streams_on(self, link: NodeLink) -> HopStreams:
        """The search streams to first hops the resident companion keeps (on its link's
        host: a new host starts afresh)."""
        from hearth.search.hopstreams import HopStreams
        from hearth.search.route import SEARCH_PROTOCOL

        if self._search_streams is None or self._search_streams.host is not link.host:
            self._search_streams = HopStreams(link.host, SEARCH_PROTOCOL)
        return self._search_streams

    def tools(self) -> ToolsResult:
        """`hearth tools --json`: the manifest (MCP servers' tools mounted) and warnings."""
        manifest = self.registry.manifest()
        for entry in manifest:
            entry["description"] = self.registry.tools[entry["name"]].description
        return ToolsResult(tools=manifest, warnings=self.warnings)

    def audit(self, verify: bool) -> AuditResult:
        """`hearth audit --json`: every record, and with `verify` whether the chain holds."""
        return audit_report(self.home, verify)


def audit_report(home: Path, verify: bool) -> AuditResult:
    """`hearth audit --json` for `home`, readable without a `Service`: an audit database
    too damaged to open stops a Service, and `--verify` must still say it is unreadable."""
    try:
        with contextlib.closing(AuditLog(home)) as log:
            records = log.records()
            verified, problem = log.verify() if verify else (None, "")
    except sqlite3.DatabaseError as exc:
        if not verify or isinstance(exc, sqlite3.OperationalError):
            raise
        records, verified, problem = [], False, f"the audit database is unreadable ({exc})"
    return AuditResult(
        records=[AuditRecordView.model_validate(r) for r in records],
        verified=verified,
        problem=problem or None,
    )


def relay_name(link: NodeLink, address: str) -> str | None:
    """The relay `address` goes through (its roster name, else its id), or None when it is
    a direct address."""
    from hearth.protocol.transport.circuits import is_circuit, relay_of

    if not is_circuit(address):
        return None
    relay = relay_of(address)[0]
    member = link.roster.roster.member(relay)
    return (member.name if member is not None else "") or relay
