"""Confirmations: one small interface, a terminal prompt, and `--yes`/`--no` for scripts.

A confirmation that cannot be asked (no terminal) is a refusal, never a yes; `--yes`
never covers a control argument that untrusted input could have chosen, nor rerunning a
step a crash interrupted whose effect cannot be checked. What the
user is shown is plain text: planner, tool and web text is never interpreted as
markup or terminal escapes, control characters are made visible, and a long value
ends in "…(N more characters)" until the user answers `?` to see it whole. The
prompt goes to the terminal (stderr), never to stdout.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from hearth.protocol.kit.console import plain

SHOWN_CHARS = 200  # of each value, before "…(N more characters)"
SHOWN_ARGUMENTS = 20  # before "…(N more arguments)": none may scroll the warnings away
MAX_PROMPTS = 10  # answers that are neither yes nor no before the question is refused


@dataclass(frozen=True)
class Confirmation:
    """What the user is asked: a whole plan (reversible writes) or one step."""

    kind: str  # "plan" | "step" | "resume"
    plan_id: str
    summary: str
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    tainted: dict[str, str] = field(default_factory=dict)  # control argument -> its source

    @property
    def covered_by_yes(self) -> bool:
        """`--yes` never covers a control argument untrusted input could have chosen, nor
        running again a step a crash interrupted (it may have happened: a person decides)."""
        return not self.tainted and self.kind != "resume"

    def text(self, limit: int | None = SHOWN_CHARS) -> str:
        """The question as plain text; `limit=None` shows every value whole. Warnings
        about untrusted control arguments come first, so no value can hide them."""
        lines = [_line(self.summary, limit)]
        for arg, source in self.tainted.items():
            lines.append(
                f"  ! {_line(arg, limit)} may come from untrusted input: {_line(source, limit)}"
            )
        if self.tool:
            lines.append(f"  {_line(self.tool, limit)} with:")
        shown = list(self.arguments.items())[: SHOWN_ARGUMENTS if limit is not None else None]
        for arg, value in shown:
            lines.append(
                f"    {_line(arg, limit)} = {_line(json.dumps(value, ensure_ascii=False), limit)}"
            )
        if len(shown) < len(self.arguments):
            lines.append(f"    …({len(self.arguments) - len(shown)} more arguments)")
        return "\n".join(lines)


def _line(text: str, limit: int | None) -> str:
    """`text` on one line (a newline shown as `\\n`), so no value can forge a line."""
    return plain(text.replace("\n", "\\n"), limit)


class Confirmer(Protocol):
    async def confirm(self, request: Confirmation) -> bool: ...


@dataclass
class Scripted:
    """`--yes` (True), `--no` (False), or nobody to ask (None: refuse)."""

    answer: bool | None

    async def confirm(self, request: Confirmation) -> bool:
        if not request.covered_by_yes:
            return False
        return bool(self.answer)


@dataclass
class Terminal:
    """Ask on the terminal; without one, refuse. `--yes` answers what it may."""

    yes: bool = False
    asked: list[Confirmation] = field(default_factory=list)

    async def confirm(self, request: Confirmation) -> bool:
        self.asked.append(request)
        if self.yes and request.covered_by_yes:
            return True
        if not sys.stdin.isatty():
            return False
        import anyio  # the thin client asks without it (`ask_on_terminal`)

        return await anyio.to_thread.run_sync(ask_on_terminal, request)


def ask_on_terminal(request: Confirmation) -> bool:
    """Show the question on stderr and read y, n or ? from stdin (a terminal)."""
    out = sys.stderr
    out.write(f"\nConfirm\n{request.text()}\n")
    for _ in range(MAX_PROMPTS):
        out.write("Go ahead? [y/N, ? shows every value in full] ")
        out.flush()
        answer = sys.stdin.readline()
        if not answer:  # the terminal closed
            return False
        answer = answer.strip().lower()
        if answer == "?":
            out.write(f"{request.text(limit=None)}\n")
        elif answer in ("y", "yes"):
            return True
        elif answer in ("", "n", "no"):
            return False
    return False
