"""`hearth demo`: the end-to-end walk-through, on loopback, in temporary homes.

It starts a home node, pairs a phone, runs a request planned remotely and executed on
the phone with the built-in tools, one answered locally, then stops the node and shows
the local fallback with its reason. Every step is a real `hearth` / `hearth-node`
command, shown before it runs; every process it starts is stopped at the end. It uses
Hearth's micro-planner (kept in the package) unless `--model` names a real GGUF. Each
step is checked for what it says it does (the note and the reminder on the phone's
disk, an answer in words, the fallback with its reason): one that does not makes the
demo exit non-zero.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
from rich.console import Console
from rich.text import Text

from hearth.protocol.kit.console import plain
from hearth.protocol.model.micro.files import copy_to

from .clock import PhoneClock
from .dates import spoken
from .swarmkit import KitError, Processes, RunningNode, last_json, run, start_node
from .terminal import ask_outcome
from .tools.builtin.common import load_list
from .tools.storage import PhoneData

MICRO = (
    "Hearth's micro-planner, a micro-model trained on synthetic requests for the built-in "
    "tools (BF16 on the node, Q4_K_M on the phone)"
)
REAL = "for the real model: `hearth models pull botpsy-0.8b`, then `hearth demo --model PATH`"


def models_dir() -> Path:
    """Where the demo keeps its tiny models between runs."""
    return Path(platformdirs.user_cache_dir("hearth")) / "models"


class Walkthrough:
    """Runs the demo's commands, showing each as a person would type it."""

    def __init__(self, console: Console, homes: dict[str, Path]) -> None:
        self.console = console
        self.homes = homes  # shown as $NAME in the commands

    def shown(self, args: Sequence[str]) -> str:
        """The command as typed, with `$NAME` for the folders it names."""
        words = []
        for arg in args:
            for name, path in self.homes.items():
                if arg == str(path) or arg.startswith(f"{path}/"):
                    arg = f"${name}{arg.removeprefix(str(path))}"
                    break
            words.append(arg if arg.startswith("$") else shlex.quote(arg))
        return " ".join(words)

    def run(self, *args: str, stdin: str | None = None) -> dict[str, Any]:
        """Run a `--json` command; its one JSON object (an error object too)."""
        shown = self.shown(args) + (' <<< "$URI"' if stdin else "")
        self.console.print(Text(f"$ {shown}", style="bold cyan"))
        # everything is on loopback: the phone does not browse mDNS on this machine's LAN
        result = run(*args, stdin=stdin, env={"HEARTH_NO_MDNS": "1"}, check=False)
        try:
            return last_json(result)
        except KitError as e:
            raise SystemExit(str(e)) from None

    def announce(self, args: Sequence[str]) -> None:
        """Show a command started in the background."""
        self.console.print(Text(f"$ {self.shown(args)} &", style="bold cyan"))


def show_ask(console: Console, out: dict[str, Any]) -> None:
    """An ask's outcome: the route and why, the steps, the answer."""
    if "error" in out:
        error = out["error"]
        console.print(Text(plain(f"  error ({error['code']}): {error['message']}")))
        return
    for line in ask_outcome(out):
        console.print(Text("  ") + line)
    timings = ", ".join(f"{k.removesuffix('_ms')} {v:.0f} ms" for k, v in out["timings"].items())
    console.print(Text(f"  timings: {timings}", style="dim"))


@dataclass(frozen=True)
class Seen:
    """What one step of the walk-through did, in a person's words, and whether that is
    what it said it would do."""

    done: bool
    said: str


STEP_1 = "Note that we need milk and remind me tomorrow at 9"
STEP_3 = "Write a note: buy bread"


def from_the_request(text: str, request: str, key: str) -> bool:
    """Whether a note says what the request asked: `key` in it, and no word the request
    did not have ("we need milk" for STEP_1; not "we need milkolk")."""
    said = set(re.findall(r"\w+", text.lower()))
    return key in said and said <= set(re.findall(r"\w+", request.lower()))


def steps_of(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step of every plan of an ask's outcome."""
    return [step for plan in out.get("plans", []) for step in plan["steps"]]


def planned_at_home(out: dict[str, Any], phone: PhoneData, now: dt.datetime) -> Seen:
    """Step 1: the home planned the note and the reminder, the phone wrote both."""
    if "error" in out:
        return Seen(False, f"the request failed: {out['error']['message']}")
    ok = [s for s in steps_of(out) if s["status"] == "ok"]
    notes = [s["result"] for s in ok if s["tool"] == "notes_create"]
    reminders = [s["result"] for s in ok if s["tool"] == "reminder_create"]
    kept = {n["text"] for n in load_list(phone, "notes.json")}
    note = next((n["text"] for n in notes if from_the_request(n["text"], STEP_1, "milk")), None)
    due = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(9, 0))
    reminder = next(
        (r for r in reminders if dt.datetime.fromisoformat(r["at"]).replace(tzinfo=None) == due),
        None,
    )
    if out["route"] != "remote" or note is None or note not in kept or reminder is None:
        return Seen(
            False,
            "the note about milk and the reminder for tomorrow at 09:00 were not both "
            "written on the phone",
        )
    return Seen(
        True,
        f'planned at home, run on the phone: the note "{plain(note)}" is in its notes, '
        f'and a reminder "{plain(reminder["text"])}" is set for {spoken(due, now)}',
    )


def answered_locally(out: dict[str, Any]) -> Seen:
    """Step 2: the phone's own model answered in words, calling nothing."""
    if "error" in out:
        return Seen(False, f"the request failed: {out['error']['message']}")
    answer = out["answer"].strip()
    if out["route"] != "local" or steps_of(out) or not any(ch.isalpha() for ch in answer):
        return Seen(False, "the phone's model did not answer in words")
    return Seen(True, f'the phone\'s own model answered in words: "{plain(answer, 160)}"')


def fell_back(out: dict[str, Any], phone: PhoneData) -> Seen:
    """Step 3: with the home away the phone planned and wrote the note itself, and said
    why it answered alone."""
    if "error" in out:
        return Seen(False, f"the request failed: {out['error']['message']}")
    ok = [s for s in steps_of(out) if s["status"] == "ok" and s["tool"] == "notes_create"]
    kept = {n["text"] for n in load_list(phone, "notes.json")}
    texts = [s["result"]["text"] for s in ok]
    note = next((t for t in texts if from_the_request(t, STEP_3, "bread")), None)
    if out["route"] != "local" or note is None or note not in kept or not out["reason"]:
        return Seen(False, 'the phone did not write the note "buy bread" itself')
    return Seen(
        True,
        f'the phone answered alone ({plain(out["reason"], 160)}): the note "{plain(note)}" '
        f'is in its notes; answer: "{plain(out["answer"], 160)}"',
    )


def run_demo(model: Path | None = None) -> None:
    """The walk-through; `model` is a real GGUF for the node and the phone (default: the
    micro-planner). Exits non-zero when a step does not do what it says."""
    console = Console(highlight=False)
    console.rule("Hearth demo")
    if model is None:
        node_model, phone_model = copy_to(models_dir())
        console.print(f"The models: {MICRO}; {REAL}.", markup=False)
    else:
        node_model = phone_model = model.resolve()
        console.print(f"Model for the node and the phone: {model}", markup=False)
    with tempfile.TemporaryDirectory(prefix="hearth-demo-") as tmp:
        node_home, phone_home = Path(tmp) / "node", Path(tmp) / "phone"
        folders = {"NODE": node_home, "PHONE": phone_home, "MODELS": node_model.parent}
        demo = Walkthrough(console, folders)
        console.print(
            "\n" + "\n".join(f"{name}={path}" for name, path in folders.items()), markup=False
        )
        demo.run("hearth-node", "init", "--name", "home", "--json", "--home", str(node_home))
        with Processes() as processes:
            try:
                node = start_node(
                    processes, node_home, "--model", str(node_model), announce=demo.announce
                )
            except KitError:
                raise SystemExit("the home node did not start") from None
            console.print(f"  home node {node.peer_id} listening on {node.addrs[0]}")
            seen = _walk(demo, node, phone_home, phone_model)
    failed = [i for i, s in enumerate(seen, 1) if not s.done]
    console.rule()
    if failed:
        steps = ", ".join(str(i) for i in failed)
        raise SystemExit(f"the demo's step {steps} did not do what it says")
    console.print("Every step did what it says.")


def _walk(demo: Walkthrough, node: RunningNode, phone_home: Path, model: Path) -> list[Seen]:
    console = demo.console
    phone = demo.run("hearth", "init", "--model", str(model), "--json", "--home", str(phone_home))
    console.print(f"  phone {phone['peer_id']}")
    uri = demo.run("hearth-node", "invite", "--json", "--home", str(node.home))["uri"]
    console.print("  a one-time invite: URI=hearth://pair?…")
    paired = demo.run("hearth", "pair", "-", "--json", "--home", str(phone_home), stdin=uri + "\n")
    console.print(
        f"  paired as {', '.join(paired['roles'])}; roster version {paired['roster_version']}"
    )
    ask = ("hearth", "ask", "--yes", "--json", "--home", str(phone_home))
    data = PhoneData(phone_home / "data")
    clock = PhoneClock()  # the phone's own: its settings set none

    def step(title: str, *args: str) -> dict[str, Any]:
        console.print(Text(f"\n{title}", style="bold"))
        out = demo.run(*ask, *args)
        show_ask(console, out)
        return out

    seen = []
    now = clock.now()
    out = step(
        "1. Planned on the home node, executed on the phone",
        "--route", "remote", STEP_1,
    )  # fmt: skip
    seen.append(planned_at_home(out, data, now))
    out = step("2. Answered by the phone's own model", "--route", "local", "What time is it?")
    seen.append(answered_locally(out))
    console.print(Text("\n$ kill -TERM <the node>", style="bold cyan"))
    node.proc.send_signal(signal.SIGTERM)
    node.proc.wait(timeout=30)
    out = step(
        "3. Home node stopped: the phone falls back to itself",
        "--route", "auto", STEP_3,
    )  # fmt: skip
    seen.append(fell_back(out, data))
    console.print()
    for i, s in enumerate(seen, 1):
        mark = Text("done   ", style="green") if s.done else Text("NOT DONE", style="bold red")
        console.print(Text(f"{i}. ") + mark + Text(f" {s.said}"))
    audit = demo.run("hearth", "audit", "--verify", "--json", "--home", str(phone_home))
    state = "intact" if audit["verified"] else f"TAMPERED ({audit.get('problem', '')})"
    console.print(f"  {len(audit['records'])} audit records, hash chain {state}")
    return seen
