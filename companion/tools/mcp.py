"""MCP servers as phone tools: stdio servers from the phone's `config.toml`.

    [[mcp]]
    name = "fs"
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "/sdcard/Documents"]
    start_timeout_s = 10   # start-up and session initialisation (initialize, tools/list)
    call_timeout_s = 30    # each tool call
    [mcp.tools.read_text_file]   # the owner relaxes one named tool
    tier = "read-only"
    control_args = ["path"]
    private = true
    key_fields = ["id"]          # a `$ref` selection may pick these as the owner's ids

Each server's tools are mounted as `<server>.<tool>`. The phone trusts a server about
nothing: its tool is irreversible and open-world, takes only the arguments its schema
declares, and every one of them is a control argument, unless the owner's config
relaxes that tool; the server's own annotations may only make a tool stricter. A tool
named like a built-in or like a tool already mounted is refused (the server's other
tools still mount). Servers start in parallel; one that cannot start or initialise in
time is left out and reported, and the request goes on without it. A server's stderr
goes to `logs/mcp-<name>.log` under the home (0600, capped), never to the terminal.
Its stdout is read a message (a line) at a time, at most `LINE_CAP` bytes: a longer
one ends the link (`protocol_error`: left out at start, the call refused after). While
`ASKED_CAP` of its own requests wait for their answers to reach it, it is not read (a
server that asks and never reads stalls itself: its call times out).
Results are untrusted: the executor's taint rules apply.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hearth.protocol.model.validate import check_schemas
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .registry import BUILTIN, Annotations, Registry, Tier, Tool, ToolContext

STRICTNESS = (Tier.READ_ONLY, Tier.OPEN_WORLD_READ, Tier.REVERSIBLE, Tier.IRREVERSIBLE)
LOG_CAP = 1 << 20  # bytes of a server's stderr kept per start; the rest is read and dropped
LINE_CAP = 4 << 20  # bytes of one message from a server (a JSON-RPC line)
ASKED_CAP = 16  # a server's requests (pings) not yet answered; beyond, it is not read
STOP_GRACE_S = 2.0  # after its stdin closes, then after SIGTERM, before SIGKILL
RESULT_CAP = 64 * 1024  # characters of one call's result that reach the executor
MAX_PARTS = 256  # content parts of one call's result
SCHEMA_CAP = 16 * 1024  # bytes of one tool's input schema (it travels in every request)
DESCRIPTION_CAP = 1024
MAX_TOOLS = 64  # per server


class ToolRules(BaseModel):
    """The owner's word on one tool (`[mcp.tools.<name>]`); what is left out stays strict."""

    model_config = ConfigDict(extra="forbid")

    tier: Tier | None = None
    control_args: list[str] | None = None
    private: bool = False  # its results are private data
    open_world: bool | None = None  # default: closed only when the owner says read-only
    key_fields: list[str] = []  # fields of its entries that name the owner's objects (ids)


class McpServer(BaseModel):
    """One `[[mcp]]` entry of the phone's config."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")]
    command: Annotated[str, Field(min_length=1)]
    args: list[str] = []
    env: dict[str, str] | None = None
    start_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0
    call_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    tools: dict[str, ToolRules] = {}


class McpWarning(BaseModel):
    """A server left out of this run, or one of its tools refused, and why."""

    model_config = ConfigDict(frozen=True)

    source: str  # "mcp:<server>"
    tool: str | None = None
    code: ErrorCode
    message: str


def servers_of(entries: Any, where: str) -> list[McpServer]:
    """The `[[mcp]]` entries of a config, validated; server names are unique."""
    if not isinstance(entries, list):
        raise HearthError(ErrorCode.INVALID_INPUT, f"{where}: [[mcp]] must be an array of tables")
    try:
        servers = [McpServer.model_validate(entry) for entry in entries]
    except ValidationError as exc:
        error = exc.errors()[0]
        at = ".".join(str(p) for p in error["loc"])
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"{where}: [[mcp]] {at}: {error['msg']}"
        ) from exc
    names = [s.name for s in servers]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise HearthError(ErrorCode.INVALID_INPUT, f"{where}: two [[mcp]] servers named {twice[0]}")
    return servers


def claimed_tier(hints: Any) -> Tier:
    """The least strict tier a server's own annotations allow: they can only tighten."""

    def said(name: str) -> bool | None:
        value = getattr(hints, name, None) if hints is not None else None
        return value if isinstance(value, bool) else None

    if said("destructive_hint") is True:
        return Tier.IRREVERSIBLE
    if said("read_only_hint") is False:
        return Tier.REVERSIBLE
    if said("open_world_hint") is True:
        return Tier.OPEN_WORLD_READ
    return Tier.READ_ONLY


def strictest(*tiers: Tier) -> Tier:
    return max(tiers, key=STRICTNESS.index)


@dataclass
class _Link:
    """A server's session; after one unanswered call, once the server broke the
    protocol (`fault`) or its output ended (`ended`), it gets no more calls this run."""

    server: McpServer
    session: Any = None
    hung: bool = False
    fault: str | None = None
    ended: bool = False


@dataclass
class _Started:
    """How a server's start went: its link and tools, or why it is left out."""

    link: _Link | None = None
    tools: list[Any] = field(default_factory=list)
    failure: McpWarning | None = None
    settled: anyio.Event = field(default_factory=anyio.Event)

    def fail(self, server: McpServer, code: ErrorCode, message: str) -> None:
        if not self.settled.is_set():
            self.failure = McpWarning(source=f"mcp:{server.name}", code=code, message=message)
            self.settled.set()


@contextlib.asynccontextmanager
async def mounted(
    servers: list[McpServer], registry: Registry, logs: Path
) -> AsyncIterator[list[McpWarning]]:
    """Start every server in parallel, mount the tools of those that answered in time,
    and stop them all on exit. Yields what was left out and why."""
    warnings: list[McpWarning] = []
    if not servers:
        yield warnings
        return
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    logs.chmod(0o700)
    # the client library's complaints about what a server sends (tracebacks included)
    # never reach the terminal: the server's own side is in its log
    client_log = logging.getLogger("mcp")
    client_log.propagate = False
    if not client_log.handlers:
        client_log.addHandler(logging.NullHandler())
    stop = anyio.Event()
    started = [_Started() for _ in servers]
    async with anyio.create_task_group() as tg:
        for server, slot in zip(servers, started, strict=True):
            tg.start_soon(_serve, server, slot, logs / f"mcp-{server.name}.log", stop)
        try:
            for slot in started:  # mounted in config order, whatever order they started in
                await slot.settled.wait()
                if slot.failure is not None:
                    warnings.append(slot.failure)
                elif slot.link is not None:
                    warnings += _mount(slot.link, slot.tools, registry)
            yield warnings
        finally:
            stop.set()


async def _serve(server: McpServer, slot: _Started, log: Path, stop: anyio.Event) -> None:
    """One server's whole life, in one task (its contexts are entered and left here). A
    server not started in time is reported at once and stopped in the background."""
    err_read, err_write = os.pipe()
    link = _Link(server)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_keep_log, err_read, log)
        with anyio.CancelScope() as life:
            tasks.start_soon(_start_deadline, server, slot, life)
            try:
                await _session(link, slot, err_write, stop)
            except Exception as exc:
                if link.fault is not None:
                    slot.fail(server, ErrorCode.PROTOCOL_ERROR, f"{server.name}: {link.fault}")
                bad_command = isinstance(exc, OSError)
                code = ErrorCode.INVALID_INPUT if bad_command else ErrorCode.UNREACHABLE
                slot.fail(server, code, f"{server.name}: did not start: {_leaf(exc)}")
        tasks.cancel_scope.deadline = anyio.current_time() + 1.0  # its last words, briefly


async def _start_deadline(server: McpServer, slot: _Started, life: anyio.CancelScope) -> None:
    with anyio.move_on_after(server.start_timeout_s):
        await slot.settled.wait()
        return
    message = f"{server.name}: did not start and initialise within {server.start_timeout_s:g} s"
    slot.fail(server, ErrorCode.TIMED_OUT, message)
    life.cancel()


async def _session(link: _Link, slot: _Started, errlog: int, stop: anyio.Event) -> None:
    from mcp import ClientSession

    async with contextlib.AsyncExitStack() as stack:
        try:
            read, write = await stack.enter_async_context(_stdio(link, errlog))
        finally:
            os.close(errlog)  # the server holds its own copy
        link.session = await stack.enter_async_context(ClientSession(read, write))
        await link.session.initialize()
        slot.tools = list((await link.session.list_tools()).tools)
        if slot.settled.is_set():
            return  # too late: already reported as left out
        slot.link = link
        slot.settled.set()
        await stop.wait()


@contextlib.asynccontextmanager
async def _stdio(link: _Link, errlog: int) -> AsyncIterator[tuple[Any, Any]]:
    """The server's process (its own process group, stderr to `errlog`) and the
    session's two streams over its stdio: newline-delimited JSON-RPC. On exit its stdin
    closes; then SIGTERM, then SIGKILL to its group, `STOP_GRACE_S` apart.

    The mcp library's own stdio client keeps a line of any length (and copies it per
    read): this one keeps at most `LINE_CAP` bytes of one."""
    from mcp.client.stdio import get_default_environment

    server = link.server
    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | (server.env or {}),
        stderr=errlog,
        start_new_session=True,
    )
    into_session, from_server = anyio.create_memory_object_stream[Any](0)
    into_server, from_session = anyio.create_memory_object_stream[Any](0)
    asked = anyio.Semaphore(ASKED_CAP)  # taken per request of the server, given back per answer
    async with anyio.create_task_group() as pipes:
        pipes.start_soon(_read_messages, process.stdout, into_session, link, asked)
        pipes.start_soon(_write_messages, from_session, process.stdin, asked)
        try:
            yield from_server, into_server
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            pipes.cancel_scope.cancel()


async def _read_messages(
    stdout: Any, into_session: Any, link: _Link, asked: anyio.Semaphore
) -> None:
    """The server's messages, one a line, to the session. A line past `LINE_CAP`
    bytes is the link's fault and its end: the session sees its stream end, so what it
    waits for fails at once. Each request of the server takes one of `asked` (the
    session answers each in a task of its own: unbounded, if the answers never leave)."""
    import mcp_types
    from mcp.shared.message import ServerMessageMetadata, SessionMessage

    async def unanswered() -> None:  # the session settled a request without an answer
        asked.release()

    async def message(line: bytes) -> Any:
        try:
            parsed = mcp_types.jsonrpc_message_adapter.validate_json(line)
        except ValueError as exc:  # the session reports it (to the log) and goes on
            return exc
        if not isinstance(parsed, mcp_types.JSONRPCRequest):
            return SessionMessage(parsed)
        await asked.acquire()
        return SessionMessage(parsed, ServerMessageMetadata(on_request_unanswered=unanswered))

    pending = bytearray()  # the start of a line not yet ended
    async with into_session:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
        ):
            while True:
                *lines, rest = (await stdout.receive()).split(b"\n")
                if lines:
                    lines[0] = bytes(pending) + lines[0]
                    pending.clear()
                for line in lines:
                    if len(line) > LINE_CAP:
                        break
                    if line.strip():
                        await into_session.send(await message(line))
                else:
                    pending += rest
                    if len(pending) <= LINE_CAP:
                        continue
                link.fault = f"sent a message over {LINE_CAP >> 20} MiB"
                return
        link.ended = True  # before the session sees its stream end


async def _write_messages(from_session: Any, stdin: Any, asked: anyio.Semaphore) -> None:
    """The session's messages to the server, one a line; an answer, once written, gives
    back what its request took of `asked`."""
    import mcp_types

    async with from_session:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send(data.encode() + b"\n")
                if isinstance(message.message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
                    asked.release()


async def _stop(process: Any) -> None:
    """Close the server's stdin; SIGTERM, then SIGKILL its process group if it lingers."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await process.stdin.aclose()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with anyio.move_on_after(STOP_GRACE_S):
            await process.wait()
            break
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # what it started, left behind
    with anyio.move_on_after(STOP_GRACE_S):
        await process.aclose()


def _leaf(exc: BaseException) -> str:
    """The first real error inside exception groups, in one short line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]


async def _keep_log(fd: int, path: Path) -> None:
    """Copy a server's stderr into its log file (0600), at most `LOG_CAP` bytes."""
    os.set_blocking(fd, False)
    try:
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(out, 0o600)
    except OSError:  # say, a symlink planted in its place: the output is dropped
        out = os.open(os.devnull, os.O_WRONLY)
    kept = 0
    try:
        while True:
            await anyio.wait_readable(fd)
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                return
            if kept < LOG_CAP:
                piece = data[: LOG_CAP - kept]
                kept += len(piece)
                with contextlib.suppress(OSError):  # a full disk costs the log, not the ask
                    os.write(out, piece)
                    if kept == LOG_CAP:
                        os.write(out, b"\n[hearth: log capped; the rest of this run was dropped]\n")
    finally:
        os.close(out)
        os.close(fd)


def _mount(link: _Link, listed: list[Any], registry: Registry) -> list[McpWarning]:
    """Mount a server's tools; refuse (and report) those that cannot be mounted safely."""
    server = link.server
    builtin = {_fold(t.name) for t in registry.tools.values() if t.source == BUILTIN}
    problems = []

    def warn(tool: str | None, message: str) -> None:
        problems.append(
            McpWarning(
                source=f"mcp:{server.name}",
                tool=tool,
                code=ErrorCode.INVALID_INPUT,
                message=message,
            )
        )

    for tool in listed[:MAX_TOOLS]:
        name = f"{server.name}.{tool.name}"[:100]
        try:
            if _fold(str(tool.name)) in builtin:
                raise HearthError(
                    ErrorCode.INVALID_INPUT, f"named like the built-in tool {tool.name!r}"
                )
            registry.add(_tool(link, tool))
        except HearthError as exc:
            warn(name, f"tool {name!r} refused: {exc.message}")
    if len(listed) > MAX_TOOLS:
        warn(None, f"{server.name}: only its first {MAX_TOOLS} of {len(listed)} tools mounted")
    for name in sorted(set(server.tools) - {str(t.name) for t in listed}):
        warn(None, f"{server.name}: the config relaxes {name!r}, which the server does not list")
    return problems


def _fold(name: str) -> str:
    return name.casefold().replace("-", "_")


def _tool(link: _Link, tool: Any) -> Tool:
    server = link.server
    name = f"{server.name}.{tool.name}"
    rules = server.tools.get(tool.name, ToolRules())
    schema = _schema(tool.input_schema)
    check_schemas({name: schema})  # it travels in every request: the node would refuse it
    tier = strictest(rules.tier or Tier.IRREVERSIBLE, claimed_tier(tool.annotations))
    open_world = getattr(tool.annotations, "open_world_hint", None) is True or (
        tier is not Tier.READ_ONLY if rules.open_world is None else rules.open_world
    )
    if open_world:
        tier = strictest(tier, Tier.OPEN_WORLD_READ)
    read_only = tier in (Tier.READ_ONLY, Tier.OPEN_WORLD_READ)
    declared = schema["properties"]
    controls = declared if rules.control_args is None else rules.control_args
    built = Tool(
        name=name,
        description=(tool.description or "")[:DESCRIPTION_CAP],
        handler=_call(link, tool.name, name),
        tier=tier,
        annotations=Annotations(
            read_only=read_only,
            destructive=tier is Tier.IRREVERSIBLE,
            idempotent=read_only,
            open_world=open_world,
        ),
        control_args=frozenset(controls),
        private=rules.private,
        schema=schema,
        source=f"mcp:{server.name}",
        untrusted_results=True,
        key_fields=frozenset(rules.key_fields),
    )
    try:
        built.spec()  # a name or schema that cannot travel is refused here, not mid-request
    except ValidationError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, "not a valid tool name or schema") from exc
    return built


def _schema(given: Any) -> dict[str, Any]:
    """The server's input schema, closed: only the arguments it declares may be passed."""
    if not isinstance(given, dict) or given.get("type", "object") != "object":
        raise HearthError(ErrorCode.INVALID_INPUT, "its input schema is not an object schema")
    if len(json.dumps(given)) > SCHEMA_CAP:
        raise HearthError(ErrorCode.INVALID_INPUT, f"its input schema is over {SCHEMA_CAP} bytes")
    schema = copy.deepcopy(given)
    properties = schema.setdefault("properties", {})
    if not isinstance(properties, dict):
        raise HearthError(ErrorCode.INVALID_INPUT, "its input schema's properties are not a map")
    schema.pop("patternProperties", None)  # it would admit arguments nobody declared
    schema.update(type="object", additionalProperties=False)
    return schema


def _call(link: _Link, tool: str, name: str) -> Callable[..., Any]:
    async def call(ctx: ToolContext, **arguments: Any) -> Any:
        from mcp import MCPError

        timeout = link.server.call_timeout_s
        if link.hung:
            raise HearthError(
                ErrorCode.TIMED_OUT, f"{name}: its server left an earlier call unanswered"
            )
        if link.fault is not None:
            raise HearthError(ErrorCode.PROTOCOL_ERROR, f"{name}: its server {link.fault}")
        if link.ended:
            raise HearthError(ErrorCode.UNREACHABLE, f"{name}: its server has gone")
        try:
            with anyio.fail_after(timeout):
                result = await link.session.call_tool(tool, arguments)
        except MCPError:
            if link.fault is not None:
                raise HearthError(
                    ErrorCode.PROTOCOL_ERROR, f"{name}: its server {link.fault}"
                ) from None
            if link.ended:
                raise HearthError(
                    ErrorCode.UNREACHABLE,
                    f"{name}: its server went away mid-call (it may or may not have happened)",
                ) from None
            raise
        except TimeoutError:
            link.hung = True
            raise HearthError(
                ErrorCode.TIMED_OUT,
                f"{name}: no answer within {timeout:g} s (it may or may not have happened)",
            ) from None
        texts = _capped(
            [c.text for c in result.content if isinstance(getattr(c, "text", None), str)]
        )
        if result.is_error:
            raise HearthError(ErrorCode.PLAN_REJECTED, f"{name}: " + " ".join(texts)[:500])
        structured = getattr(result, "structured_content", None)
        if structured is not None and len(json.dumps(structured)) > RESULT_CAP:
            structured = None
        return {"content": texts, "structured": structured}

    return call


def _capped(texts: list[str]) -> list[str]:
    """At most `RESULT_CAP` characters (and `MAX_PARTS` parts) in all, the cut marked."""
    out, left = [], RESULT_CAP
    for text in texts[:MAX_PARTS]:
        if len(text) > left:
            out.append(text[:left] + f"…({len(text) - left} more characters)")
            break
        out.append(text)
        left -= len(text)
    return out
