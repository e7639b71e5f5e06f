"""The reminder tools, on `reminders.json`."""

from __future__ import annotations

from typing import Any

from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData
from .common import READ, WRITE, Short, When, append_once, key_id, load_list, when


def reminder_create(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE)
    async def reminder_create(ctx: ToolContext, text: Short, at: When) -> dict[str, Any]:
        """Set a reminder (or alarm) at a date-time."""
        reminder = {"id": key_id(ctx, 12), "text": text, "at": when(at, "at").isoformat()}
        return append_once(data, "reminders.json", reminder)  # once, also when rerun


def reminder_list(registry: Registry, data: PhoneData) -> None:
    @registry.tool(
        tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True, keys=("id",)
    )
    async def reminder_list(ctx: ToolContext) -> list[dict[str, Any]]:
        """List reminders."""
        return load_list(data, "reminders.json")
