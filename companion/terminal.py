"""What a person sees in the terminal: a request's outcome, a conversation, the inbox.

Text from a model, a tool or a peer is shown as plain text (`plain`: control
characters visible, no markup). The answer streaming in is `streaming.py`'s.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rich.console import Console
from rich.text import Text

from hearth.protocol.kit.console import plain

ARGS_SHOWN = 80  # characters of a step's arguments in a summary, before "…(N more …)"


def step_line(step: dict[str, Any]) -> Text:
    """`s1 notes_create {"text": "milk"} → ok`, or `→ refused: why`."""
    arguments = plain(json.dumps(step["arguments"], ensure_ascii=False), ARGS_SHOWN)
    line = Text(f"  {step['id']} {plain(step['tool'])} {arguments} → ")
    line.append(step["status"], style="green" if step["status"] == "ok" else "yellow")
    if step["status"] != "ok" and step.get("error"):
        line.append(f": {plain(str(step['error']), 200)}")
    return line


def ask_outcome(out: dict[str, Any]) -> list[Text]:
    """A `hearth ask` outcome as lines: the route and why, each plan's steps, the answer."""
    lines = [Text(plain(f"{out['route']}: {out['reason']}"), style="dim")]
    for plan in out["plans"]:
        lines.append(
            Text(
                f"plan {plan['plan_id'][:8]}, round {plan['round']}, "
                f"signed by {plain(plan['signer'])}",
                style="dim",
            )
        )
        lines += [step_line(step) for step in plan["steps"]]
    lines.append(Text(plain(out["answer"])))
    if out.get("untrusted_sources"):
        sources = ", ".join(out["untrusted_sources"])
        lines.append(
            Text(plain(f"written after reading untrusted input: {sources}"), style="yellow")
        )
    return lines


def print_lines(lines: list[Text], console: Console | None = None) -> None:
    """Print rich `Text` lines (never markup) on stdout."""
    console = console or Console(file=sys.stdout, highlight=False)
    for line in lines:
        console.print(line)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def conversation_lines(out: dict[str, Any]) -> list[Text]:
    """`hearth conversations`: one line per conversation, or one conversation's turns."""
    if "conversations" in out:
        if not out["conversations"]:
            return [Text("No conversations yet: `hearth ask --continue` or `hearth chat`.")]
        return [
            Text(plain(f"{c['id']}  {_when(c['updated'])}  {c['turns']} turn(s)  {c['title']}"))
            for c in out["conversations"]
        ]
    lines = [Text(plain(f"{out['id']}: {out['title']}"), style="bold")]
    for turn in out["turns"]:
        lines.append(Text(plain(f"[{_when(turn['time'])}, {turn['route']}] "), style="dim"))
        lines[-1].append(plain(f"> {turn['text']}"))
        lines += [step_line(step) for plan in turn["plans"] for step in plan["steps"]]
        lines.append(Text(plain(turn["answer"])))
    return lines


def inbox_lines(out: dict[str, Any]) -> list[Text]:
    """`hearth inbox`: what waits for the home node, then what came back."""
    lines = [
        Text(f"waiting since {_when(w['since'])}: ", style="dim").append(plain(w["text"], 200))
        for w in out["waiting"]
    ]
    for answered in out["answered"]:
        lines += ask_outcome(answered)
    for dropped in out.get("dropped", []):  # not sent, and why
        lines.append(Text(f"not sent ({plain(dropped['note'], 200)}): ", style="yellow"))
        lines[-1].append(plain(dropped["text"], 200))
    return lines or [Text("Nothing waits for the home node.")]
