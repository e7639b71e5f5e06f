"""MCP servers as phone tools: stdio servers from the phone's `config.toml`.

    [[mcp]]
    name = "weather"
    command = "python"
    args = ["weather_server.py"]

Each server's tools are mounted as `<server>.<tool>`. Their MCP annotations map to
tiers; an unannotated tool is treated as destructive and open-world, as MCP's
defaults say. Their results are untrusted: the executor's taint rules apply.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .registry import Annotations, Registry, Tier, Tool, ToolContext

CONTROL_NAMES = re.compile(
    r"^(to|recipients?|email|phone|number|url|uri|link|path|file|"
    r"filename|amount|account|iban)$",
    re.I,
)


class McpServer(BaseModel):
    """One `[[mcp]]` entry of the phone's config."""

    model_config = ConfigDict(extra="forbid")

    name: str
    command: str
    args: list[str] = []
    env: dict[str, str] | None = None


def tier_of(annotations: Annotations) -> Tier:
    if annotations.read_only:
        return Tier.OPEN_WORLD_READ if annotations.open_world else Tier.READ_ONLY
    return Tier.IRREVERSIBLE if annotations.destructive else Tier.REVERSIBLE


def annotations_of(hints: Any) -> Annotations:
    """MCP hints with MCP's defaults for what a server leaves out."""

    def hint(name: str, default: bool) -> bool:
        value = getattr(hints, name, None) if hints is not None else None
        return default if value is None else bool(value)

    read_only = hint("read_only_hint", False)
    return Annotations(
        read_only=read_only,
        destructive=False if read_only else hint("destructive_hint", True),
        idempotent=hint("idempotent_hint", False),
        open_world=hint("open_world_hint", True),
    )


@contextlib.asynccontextmanager
async def mounted(servers: list[McpServer], registry: Registry) -> AsyncIterator[None]:
    """Start every server, mount its tools, and stop them all on exit."""
    if not servers:
        yield
        return
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async with contextlib.AsyncExitStack() as stack:
        for server in servers:
            params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
            try:
                read, write = await stack.enter_async_context(stdio_client(params))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listed = await session.list_tools()
            except Exception as exc:
                raise HearthError(
                    ErrorCode.INVALID_INPUT, f"MCP server {server.name!r} did not start: {exc}"
                ) from exc
            for tool in listed.tools:
                registry.add(_tool(server.name, session, tool))
        yield


def _tool(server: str, session: Any, tool: Any) -> Tool:
    async def call(ctx: ToolContext, **arguments: Any) -> Any:
        result = await session.call_tool(tool.name, arguments)
        texts = [c.text for c in result.content if getattr(c, "text", None) is not None]
        if result.is_error:
            raise HearthError(
                ErrorCode.PLAN_REJECTED, f"{server}.{tool.name}: " + " ".join(texts)[:500]
            )
        return {"content": texts, "structured": getattr(result, "structured_content", None)}

    annotations = annotations_of(tool.annotations)
    schema = dict(tool.input_schema or {"type": "object"})
    return Tool(
        name=f"{server}.{tool.name}",
        description=tool.description or "",
        handler=call,
        tier=tier_of(annotations),
        annotations=annotations,
        control_args=frozenset(p for p in schema.get("properties", {}) if CONTROL_NAMES.match(p)),
        private=False,
        schema=schema,
        source=f"mcp:{server}",
        untrusted_results=True,
    )
