"""The note tools, on `notes.json`."""

from __future__ import annotations

from typing import Any

from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData
from .common import READ, WRITE, Text, append_once, key_id, load_list


def notes_create(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE)
    async def notes_create(ctx: ToolContext, text: Text, title: str = "") -> dict[str, Any]:
        """Write a note."""
        note = {"id": key_id(ctx, 12), "title": title, "text": text}
        return append_once(data, "notes.json", note)  # once, also when rerun after a crash


def notes_search(registry: Registry, data: PhoneData) -> None:
    @registry.tool(
        tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True, keys=("id",)
    )
    async def notes_search(ctx: ToolContext, query: str = "") -> list[dict[str, Any]]:
        """Find notes containing the query (all notes when it is empty)."""
        q = query.lower()
        notes = load_list(data, "notes.json")
        return [n for n in notes if q in n["text"].lower() or q in n["title"].lower()]
