"""Confirmations: one small interface, a terminal prompt, and `--yes`/`--no` for scripts.

A confirmation that cannot be asked (no terminal) is a refusal, never a yes; `--yes`
never covers a control argument that untrusted input could have chosen.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio


@dataclass(frozen=True)
class Confirmation:
    """What the user is asked: a whole plan (reversible writes) or one step."""

    kind: str  # "plan" | "step" | "resume"
    plan_id: str
    summary: str
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    tainted: dict[str, str] = field(default_factory=dict)  # control argument -> its source

    def text(self) -> str:
        lines = [self.summary]
        if self.tool:
            lines.append(f"  {self.tool}({json.dumps(self.arguments, ensure_ascii=False)})")
        for arg, source in self.tainted.items():
            lines.append(f"  ! {arg!r} may come from untrusted input: {source}")
        return "\n".join(lines)


class Confirmer(Protocol):
    async def confirm(self, request: Confirmation) -> bool: ...


@dataclass
class Scripted:
    """`--yes` (True), `--no` (False), or nobody to ask (None: refuse)."""

    answer: bool | None

    async def confirm(self, request: Confirmation) -> bool:
        if request.tainted:
            return False  # --yes never covers a tainted control argument
        return bool(self.answer)


@dataclass
class Terminal:
    """Ask on the terminal; without one, refuse. `--yes` answers what it may."""

    yes: bool = False
    asked: list[Confirmation] = field(default_factory=list)

    async def confirm(self, request: Confirmation) -> bool:
        self.asked.append(request)
        if self.yes and not request.tainted:
            return True
        if not sys.stdin.isatty():
            return False

        def ask() -> bool:
            from rich.console import Console
            from rich.prompt import Confirm

            Console(stderr=True).print(f"[bold yellow]Confirm[/]\n{request.text()}")
            return Confirm.ask("Go ahead?", default=False)

        return await anyio.to_thread.run_sync(ask)
