"""The file tools, inside the sandbox folder (`files/`) only."""

from __future__ import annotations

from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData, private_dir, write_atomic
from .common import READ, WRITE, Short, Text


def files_read(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def files_read(ctx: ToolContext, path: Short) -> dict[str, Any]:
        """Read a text file inside the phone's Hearth folder."""
        target = data.inside_sandbox(path)
        if not target.is_file():
            raise HearthError(ErrorCode.PLAN_REJECTED, "path: no such file")
        return {"path": path, "text": target.read_text(errors="replace")[:20000]}


def files_write(registry: Registry, data: PhoneData) -> None:
    def file_exists(args: dict[str, Any]) -> bool:
        try:
            return data.inside_sandbox(args["path"]).exists()
        except HearthError:  # outside the sandbox: nothing is overwritten, the write is refused
            return False

    @registry.tool(
        tier=Tier.REVERSIBLE, annotations=WRITE, control=("path",), overwrites=file_exists
    )
    async def files_write(ctx: ToolContext, path: Short, text: Text) -> dict[str, Any]:
        """Write a text file inside the phone's Hearth folder (replacing one is irreversible)."""
        target = data.inside_sandbox(path)
        private_dir(target.parent)
        write_atomic(target, text)
        return {"path": path, "bytes": len(text.encode())}


def files_list(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def files_list(ctx: ToolContext, folder: str = ".") -> list[str]:
        """List files in a folder inside the phone's Hearth folder."""
        base = data.inside_sandbox(folder)
        root = data.sandbox.resolve()
        return sorted(str(p.relative_to(root)) for p in base.rglob("*") if p.is_file())[:500]
