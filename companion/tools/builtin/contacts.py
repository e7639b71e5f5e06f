"""The contacts tool, on a vCard file (`contacts.vcf`)."""

from __future__ import annotations

from typing import Any

from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData
from .common import READ, Short


def contacts_search(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def contacts_search(ctx: ToolContext, query: Short) -> list[dict[str, Any]]:
        """Find contacts whose name contains the query."""
        contacts_file = data.path("contacts.vcf")
        if not contacts_file.exists():
            return []
        import vobject
        from vobject.base import ContentLine

        found = []
        for card in vobject.readComponents(contacts_file.read_text()):
            name = str(card.fn.value) if hasattr(card, "fn") else ""
            if query.lower() in name.lower():
                lines = {
                    key: [x.value for x in card.contents.get(key, []) if isinstance(x, ContentLine)]
                    for key in ("tel", "email")
                }
                found.append({"name": name, "phone": lines["tel"], "email": lines["email"]})
        return found
