"""Exit backends: what an exit node searches. Small interface, two implementations:
the local full-text index (the embedded default) and a SearXNG instance."""

from __future__ import annotations

from typing import Protocol

from .packets import Result


class Backend(Protocol):
    """Anything an exit can ask: `search(query, limit)` → results (untrusted text)."""

    name: str

    async def search(self, query: str, limit: int) -> list[Result]: ...
