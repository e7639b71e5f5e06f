"""`hearth demo`: the end-to-end walk-through, on loopback, in temporary homes.

It makes the tiny models if missing, starts a home node, pairs a phone, runs a
request planned remotely and executed on the phone with the built-in tools, one
answered locally, then stops the node and shows the local fallback with its reason.
Every step is a real `hearth` / `hearth-node` command; every process it starts is
stopped at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import platformdirs
from rich.console import Console

from hearth.protocol.model.tiny import make_tiny

BIN = Path(sys.executable).parent


def models_dir() -> Path:
    """Where the demo keeps its tiny models between runs."""
    return Path(platformdirs.user_cache_dir("hearth")) / "models"


def _run(*args: str, stdin: str | None = None) -> dict[str, Any]:
    # everything is on loopback: the phone does not browse mDNS on this machine's LAN
    env = {**os.environ, "HEARTH_NO_MDNS": "1"}
    result = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    payload: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return payload


def _show_ask(console: Console, title: str, out: dict[str, Any]) -> None:
    console.print(f"\n[bold]{title}[/]")
    if "error" in out:
        console.print(f"  error: {out['error']['code']}: {out['error']['message']}")
        return
    console.print(f"  route: [bold]{out['route']}[/] ({out['reason']})")
    for plan in out["plans"]:
        console.print(
            f"  plan {plan['plan_id'][:8]} signed by {plan['signer'][:16]}…, round {plan['round']}:"
        )
        for step in plan["steps"]:
            args = json.dumps(step["arguments"], ensure_ascii=False)[:70]
            console.print(f"    {step['id']} {step['tool']}({args}) → {step['status']}")
    console.print(f"  answer: {out['answer'][:100]!r}")
    console.print(f"  timings: {out['timings']}")


def run_demo() -> None:
    console = Console()
    console.rule("Hearth demo")
    console.print(
        "The tiny models have random weights: their plans are well-formed and "
        "executed for real, but not sensible.\nFor real answers: "
        "`hearth models pull botpsy-0.8b` (and `--quant bf16` for the node)."
    )
    with console.status("making the tiny test models"):
        bf16, q4 = make_tiny(models_dir())
    with tempfile.TemporaryDirectory(prefix="hearth-demo-") as tmp:
        node_home, phone_home = Path(tmp) / "node", Path(tmp) / "phone"
        _run("hearth-node", "init", "--name", "home", "--json", "--home", str(node_home))
        ready = node_home / "ready.json"
        node = subprocess.Popen(
            [
                str(BIN / "hearth-node"),
                "serve",
                "--home",
                str(node_home),
                "--model",
                str(bf16),
                "--listen",
                "/ip4/127.0.0.1/tcp/0",
                "--no-mdns",
                "--ready-file",
                str(ready),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while not ready.exists():
                if node.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the home node did not start")
                time.sleep(0.05)
            info = json.loads(ready.read_text())
            console.print(f"\nhome node {info['peer_id']} on {info['addrs'][0]}")
            phone = _run("hearth", "init", "--model", str(q4), "--json", "--home", str(phone_home))
            uri = _run("hearth-node", "invite", "--json", "--home", str(node_home))["uri"]
            paired = _run(
                "hearth", "pair", "-", "--json", "--home", str(phone_home), stdin=uri + "\n"
            )
            console.print(
                f"phone {phone['peer_id']} paired (roles: {paired['roles']}, "
                f"roster v{paired['roster_version']})"
            )
            ask = ("hearth", "ask", "--yes", "--json", "--home", str(phone_home))
            _show_ask(
                console,
                "1. Planned on the home node, executed on the phone",
                _run(
                    *ask,
                    "--route",
                    "remote",
                    "--tool-choice",
                    "required",
                    "Note that we need milk and remind me tomorrow at 9",
                ),
            )
            _show_ask(
                console,
                "2. Answered by the phone's own model",
                _run(*ask, "--route", "local", "What time is it?"),
            )
            node.send_signal(signal.SIGTERM)
            node.wait(timeout=30)
            _show_ask(
                console,
                "3. Home node stopped: the phone falls back to itself",
                _run(*ask, "--route", "auto", "Write a note: buy bread"),
            )
            audit = _run("hearth", "audit", "--verify", "--json", "--home", str(phone_home))
            console.print(
                f"\naudit log: {len(audit['records'])} records, chain verified: {audit['verified']}"
            )
        finally:
            if node.poll() is None:
                os.kill(node.pid, signal.SIGKILL)
                node.wait()
