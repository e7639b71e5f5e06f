"""The Python API for apps: the phone's assistant in the app's own process.

```python
async with Companion(home) as companion:
    @companion.tool(tier="read-only", description="Today's weather in a city")
    async def weather(city: str) -> dict[str, str]: ...

    result = await companion.ask("What's the weather in Lyon?")
```

`Companion` opens an in-process `Service` (the same engine as `hearth serve`: router,
local model, link to the home node, executor, conversations) and gives typed results.
An app's own tools join the phone's registry with a tier, privacy and control
arguments, and then run through the executor like any built-in tool: confirmations,
taint and egress rules included. Run a `Companion` inside a trio event loop.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, Unpack

import anyio
from pydantic import BaseModel

from hearth.protocol.kit.home import resolve_home
from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .client_confirm import RelayedConfirmer
from .confirm import Confirmation, Confirmer, Scripted
from .events import AnswerEvent, AskRequest, ErrorEvent, Event, EventSink, discard
from .results import (
    AskResult,
    AuditResult,
    ConversationDetail,
    ConversationsResult,
    SearchResult,
    StatusResult,
    ToolsResult,
)
from .tools.registry import Annotations, Tier, Tool, ToolContext, args_model_of

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .service import Service

__all__ = ["AskOptions", "Companion", "Confirmation", "Events", "Tier"]

APP = "app"  # the source of an app's own tools in `hearth tools`
CANCEL_GRACE_S = 0.5  # after a stream is closed, for the node to hear it before the cut
F = TypeVar("F", bound=Callable[..., Any])


class AskOptions(TypedDict, total=False):
    """How `Companion.ask` and `Companion.stream` may ask: `route` ("auto", "local",
    "remote"; default auto), `tool_choice` ("auto", "required", "none"; default auto),
    `thinking` (default off), `conversation_id` or `continue_last` (the last one) to
    continue a conversation."""

    route: Literal["auto", "local", "remote"]
    tool_choice: Literal["auto", "required", "none"]
    thinking: bool
    conversation_id: str | None
    continue_last: bool


# What a tool of each tier is, unless the app says otherwise (MCP-style hints).
TIER_ANNOTATIONS = {
    Tier.READ_ONLY: Annotations(
        read_only=True, destructive=False, idempotent=True, open_world=False
    ),
    Tier.OPEN_WORLD_READ: Annotations(read_only=True, destructive=False, idempotent=True),
    Tier.REVERSIBLE: Annotations(read_only=False, destructive=False),  # open-world, as MCP's:
    # an app keeps its data wherever it likes (its cloud), so private data written there leaves
    Tier.IRREVERSIBLE: Annotations(),  # destructive, open-world: the most careful reading
}


def app_tool(
    fn: Callable[..., Any],
    *,
    tier: Tier,
    private: bool,
    control_args: Iterable[str] | None,
    description: str | None,
    annotations: Annotations | None,
    untrusted_results: bool | None,
    key_fields: Iterable[str] = (),
) -> Tool:
    """`fn` (async or not; keyword arguments with type hints) as a registry `Tool`, strict
    where the app says nothing (as MCP tools are): its results are untrusted (a read of
    the app's own data may hold anyone's text, as the phone's own reads do), and every
    argument of a write or of an open-world tool is a control argument."""
    name = fn.__name__
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"tool {name}: {param.name} must be a plain named parameter")
        if param.annotation is inspect.Parameter.empty:
            raise TypeError(f"tool {name}: {param.name} needs a type hint (it makes the schema)")
    model = args_model_of(fn, name, takes_ctx=False)
    hints = annotations or TIER_ANNOTATIONS[tier]
    open_world = hints.open_world or tier is Tier.OPEN_WORLD_READ
    if control_args is None:
        strict = open_world or tier in (Tier.REVERSIBLE, Tier.IRREVERSIBLE)
        control_args = model.model_fields if strict else ()
    control = frozenset(control_args)
    if unknown := control - set(model.model_fields):
        raise TypeError(f"tool {name}: no parameter {', '.join(sorted(unknown))}")

    async def handler(ctx: ToolContext, **arguments: Any) -> Any:
        checked = model.model_validate(arguments)  # the hints' own types (models, dates...)
        call = functools.partial(
            fn, **{name: getattr(checked, name) for name in model.model_fields}
        )
        if inspect.iscoroutinefunction(fn):
            value = await call()
        else:
            value = await anyio.to_thread.run_sync(call)
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value

    return Tool(
        name=name,
        description=description or inspect.getdoc(fn) or "",
        handler=handler,
        tier=tier,
        annotations=hints,
        control_args=control,
        private=private,
        args_model=model,
        source=APP,
        untrusted_results=True if untrusted_results is None else untrusted_results,
        key_fields=frozenset(key_fields),
    )


class Events:
    """One ask's events as they come, ending with its `answer` or `error` event.
    Answer a `confirm` event with `answer(confirm_id, approve)`; `aclose()` (or leaving
    `async with`) cancels the ask if it still runs."""

    def __init__(self, tasks: TaskGroup, companion: Companion, request: AskRequest) -> None:
        send, self._receive = anyio.create_memory_object_stream[Event](64)
        self._relay = RelayedConfirmer(self._deliver)
        self._send = send
        self._scope = anyio.CancelScope()
        self._cancel = anyio.Event()
        self._tasks = tasks
        tasks.start_soon(self._run, companion, request)

    async def _deliver(self, event: Event) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._send.send(event)  # else nobody reads any more: the ask is cancelled

    async def _run(self, companion: Companion, request: AskRequest) -> None:
        with self._scope:
            async with self._send:
                final: Event
                try:
                    result = await companion.ask(
                        request.text,
                        **_options(request),
                        on_event=self._deliver,
                        confirm=self._relay,
                        cancel=self._cancel,
                    )
                    final = AnswerEvent(result=result)
                except HearthError as exc:
                    final = ErrorEvent(code=exc.code.value, message=exc.message)
                await self._deliver(final)

    def answer(self, confirm_id: str, approve: bool) -> bool:
        """Answer a confirmation of this ask; False when none is open with that id."""
        return self._relay.answer(confirm_id, approve)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Stop reading: the ask, if it still runs, is told to stop, then cut off."""
        await self._receive.aclose()
        if not self._scope.cancel_called:
            self._cancel.set()
            self._tasks.start_soon(self._cut)

    async def _cut(self) -> None:
        await anyio.sleep(CANCEL_GRACE_S)
        self._scope.cancel()

    async def __aenter__(self) -> Events:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _options(request: AskRequest) -> dict[str, Any]:
    return request.model_dump(
        include={"route", "tool_choice", "thinking", "conversation_id", "continue_last"}
    )


class Companion:
    """The phone's assistant for one home directory (`--home`; default `HEARTH_HOME`,
    else the platform's data directory), opened with `async with`."""

    def __init__(self, home: Path | str | None = None, *, resident: bool = True) -> None:
        self.home = resolve_home(
            Path(home) if home is not None else None, "HEARTH_HOME", "hearth", create=True
        )
        self.resident = resident  # keep the link to the home node up and the model warm
        self._tools: list[Tool] = []
        self._service: Service | None = None
        self._stack: AsyncExitStack | None = None
        self._tasks: TaskGroup | None = None

    async def __aenter__(self) -> Companion:
        from .home_lock import instance_lock
        from .service import Service

        async with AsyncExitStack() as stack:
            stack.enter_context(instance_lock(self.home))  # as `hearth serve`: one per home
            service = await stack.enter_async_context(
                Service.open(self.home, resident=self.resident)
            )
            for tool in self._tools:
                service.registry.add(tool)
            self._tasks = await stack.enter_async_context(anyio.create_task_group())
            self._service = service
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._stack is not None and self._tasks is not None
        self._tasks.cancel_scope.cancel()  # streams nobody finished reading
        stack, self._stack, self._service = self._stack, None, None
        await stack.__aexit__(kind, exc, tb)

    @property
    def service(self) -> Service:
        if self._service is None:
            raise HearthError(ErrorCode.INVALID_INPUT, "use the Companion inside `async with`")
        return self._service

    def tool(
        self,
        *,
        tier: Tier | Literal["read-only", "open-world-read", "reversible-write", "irreversible"],
        private: bool = False,
        control_args: Iterable[str] | None = None,
        description: str | None = None,
        annotations: Annotations | None = None,
        untrusted_results: bool | None = None,
        key_fields: Iterable[str] = (),
    ) -> Callable[[F], F]:
        """Register an app function as a tool of the phone. Its keyword parameters, with
        their type hints, make its schema; `control_args` name those that choose where an
        action goes (recipient, URL, path, amount): a value untrusted input could have
        chosen there is confirmed, never covered by a blanket yes. `private` results
        never leave the phone unless the owner's policy says so; `untrusted_results`
        marks what the tool returns as written by others (a web page, a message).
        Strict unless the app says otherwise, like an MCP tool: by default a tool's
        results are untrusted (`untrusted_results=False` for data only the owner writes),
        and every argument of a write (reversible or irreversible) or of an open-world
        tool is a control argument. `key_fields` name
        the fields of its results' entries that identify the owner's objects (an id): a
        plan's `$ref` selection by trusted criteria may pick them as trusted."""

        def register(fn: F) -> F:
            tool = app_tool(
                fn,
                tier=Tier(tier),
                private=private,
                control_args=control_args,
                description=description,
                annotations=annotations,
                untrusted_results=untrusted_results,
                key_fields=key_fields,
            )
            if self._service is not None:
                self._service.registry.add(tool)
            self._tools.append(tool)
            return fn

        return register

    async def ask(
        self,
        text: str,
        *,
        confirm: Literal["yes", "no"] | Confirmer = "no",
        on_event: EventSink = discard,
        cancel: anyio.Event | None = None,
        **options: Unpack[AskOptions],
    ) -> AskResult:
        """Route, plan, run and answer one request (`options`: see `AskOptions`). `confirm`:
        "no" refuses what needs a confirmation, "yes" approves it (never a control argument
        untrusted input could have chosen), or a `Confirmer` (any object with `async
        confirm(Confirmation) -> bool`) is asked each time. Raises `HearthError` (its
        `code` as in the CLI)."""
        asked = "ask" if not isinstance(confirm, str) else confirm
        request = AskRequest(text=text, confirm=asked, **options)
        confirmer = Scripted(confirm == "yes") if isinstance(confirm, str) else confirm
        from .ask import ask  # the engine loads with the Companion's service, not on import

        with single_error():
            return await ask(self.service, request, on_event, confirmer, cancel or anyio.Event())

    def stream(self, text: str, **options: Unpack[AskOptions]) -> Events:
        """The ask's events as they come (`async for event in companion.stream(...)`):
        route, tokens, steps, confirmations to answer with `Events.answer`, then the
        answer or an error (`options`: see `AskOptions`)."""
        request = AskRequest(text=text, **options)
        if self._tasks is None:
            raise HearthError(ErrorCode.INVALID_INPUT, "use the Companion inside `async with`")
        return Events(self._tasks, self, request)

    async def status(self) -> StatusResult:
        from . import reports

        return await reports.node_status(self.service)

    async def search(self, query: str, hops: int = 2, limit: int = 10) -> SearchResult:
        from . import reports

        return await reports.peer_search(self.service, query, hops, limit)

    def tools(self) -> ToolsResult:
        from . import reports

        return reports.tool_list(self.service)

    def audit(self, verify: bool = False) -> AuditResult:
        from . import reports

        return reports.audit_report(self.service.home, verify)

    def conversations(self) -> ConversationsResult:
        return self.service.conversations.summaries()

    def conversation(self, conversation_id: str) -> ConversationDetail:
        return self.service.conversations.detail(conversation_id)
