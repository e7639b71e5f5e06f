"""`hearth demo`: the end-to-end walk-through, on loopback, in temporary homes.

It starts a home node, pairs a phone, runs a request planned remotely and executed on
the phone with the built-in tools, one answered locally, then stops the node and shows
the local fallback with its reason. Every step is a real `hearth` / `hearth-node`
command, shown before it runs; every process it starts is stopped at the end. It uses
the tiny random-weight models (made if missing) unless `--model` names a real GGUF.
"""

from __future__ import annotations

import shlex
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import platformdirs
from rich.console import Console
from rich.text import Text

from hearth.protocol.kit.console import plain
from hearth.protocol.model.tiny import make_tiny

from .swarmkit import KitError, Processes, RunningNode, last_json, run, start_node
from .terminal import ask_outcome

NOISE = "noise from a random-weight model"


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


def show_ask(console: Console, out: dict[str, Any], noise: bool) -> None:
    """An ask's outcome; a random-weight model's text is labelled as the noise it is."""
    if "error" in out:
        error = out["error"]
        console.print(Text(plain(f"  error ({error['code']}): {error['message']}")))
        return
    for line in ask_outcome(out)[:-1]:  # the answer comes last, labelled
        console.print(Text("  ") + line)
    label = f"answer ({NOISE})" if noise else "answer"
    console.print(Text(f"  {label}: ", style="bold") + Text(plain(out["answer"], 160)))
    timings = ", ".join(f"{k.removesuffix('_ms')} {v:.0f} ms" for k, v in out["timings"].items())
    console.print(Text(f"  timings: {timings}", style="dim"))


def run_demo(model: Path | None = None) -> None:
    """The walk-through; `model` is a real GGUF for the node and the phone (default: the
    tiny random-weight models)."""
    console = Console(highlight=False)
    console.rule("Hearth demo")
    if model is None:
        with console.status("making the tiny test models"):
            node_model, phone_model = make_tiny(models_dir())
        console.print(
            "The tiny models have random weights: their plans are well-formed and executed "
            f"for real, but their text is {NOISE}.\nThe same walk-through with a real model: "
            "`hearth models pull botpsy-0.8b`, then `hearth demo --model PATH`."
        )
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
            _walk(demo, node, phone_home, phone_model, noise=model is None)


def _walk(demo: Walkthrough, node: RunningNode, phone_home: Path, model: Path, noise: bool) -> None:
    console = demo.console
    phone = demo.run("hearth", "init", "--model", str(model), "--json", "--home", str(phone_home))
    console.print(f"  phone {phone['peer_id']}")
    if noise:
        console.print(
            "  a random-weight model never ends a text value on its own: cap values for the demo"
        )
        demo.run(
            "hearth", "config", "set", "limits.max_value_chars", "40", "--json",
            "--home", str(phone_home),
        )  # fmt: skip
    uri = demo.run("hearth-node", "invite", "--json", "--home", str(node.home))["uri"]
    console.print("  a one-time invite: URI=hearth://pair?…")
    paired = demo.run("hearth", "pair", "-", "--json", "--home", str(phone_home), stdin=uri + "\n")
    console.print(
        f"  paired as {', '.join(paired['roles'])}; roster version {paired['roster_version']}"
    )
    ask = ("hearth", "ask", "--yes", "--json", "--home", str(phone_home))
    walk = [
        (
            "1. Planned on the home node, executed on the phone",
            ("--route", "remote", "--tool-choice", "required"),
            "Note that we need milk and remind me tomorrow at 9",
        ),
        ("2. Answered by the phone's own model", ("--route", "local"), "What time is it?"),
        (
            "3. Home node stopped: the phone falls back to itself",
            ("--route", "auto"),
            "Write a note: buy bread",
        ),
    ]
    for i, (title, options, request) in enumerate(walk):
        console.print(Text(f"\n{title}", style="bold"))
        if i == 2:
            console.print(Text("$ kill -TERM <the node>", style="bold cyan"))
            node.proc.send_signal(signal.SIGTERM)
            node.proc.wait(timeout=30)
        show_ask(console, demo.run(*ask, *options, request), noise)
    audit = demo.run("hearth", "audit", "--verify", "--json", "--home", str(phone_home))
    state = "intact" if audit["verified"] else f"TAMPERED ({audit.get('problem', '')})"
    console.print(f"  {len(audit['records'])} audit records, hash chain {state}")
