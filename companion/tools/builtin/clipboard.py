"""The clipboard tools: Termux's clipboard, or `clipboard.txt` on a PC."""

from __future__ import annotations

from typing import Any

from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData, write_atomic
from .common import READ, WRITE, Text, termux


def read_clipboard(data: PhoneData) -> str:
    text = termux("termux-clipboard-get")
    if text is not None:
        return text
    path = data.path("clipboard.txt")
    return path.read_text() if path.exists() else ""


def clipboard_get(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def clipboard_get(ctx: ToolContext) -> str:
        """Read the clipboard."""
        return read_clipboard(data)


def clipboard_set(registry: Registry, data: PhoneData) -> None:
    def clipboard_holds_something(_: dict[str, Any]) -> bool:
        return read_clipboard(data) != ""

    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE, overwrites=clipboard_holds_something)
    async def clipboard_set(ctx: ToolContext, text: Text) -> dict[str, Any]:
        """Put text on the clipboard."""
        if termux("termux-clipboard-set", text) is None:
            write_atomic(data.path("clipboard.txt"), text)
        return {"copied": len(text)}
