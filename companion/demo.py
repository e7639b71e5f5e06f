"""`hearth demo`: what Hearth can do so far, on loopback, in temporary homes.

Today that is the foundation: the tiny models generate through llama.cpp, and a
home node and a phone, as two real processes, exchange typed frames over the
private swarm (spec pnet + Noise + Yamux + roster gate), while a device with the
wrong swarm key and one off the roster are refused. Pairing, planning and the
executor arrive with the node and companion issues.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import platformdirs
from rich.console import Console

from hearth.protocol.model.tiny import make_tiny


def models_dir() -> Path:
    """Where the demo keeps its tiny models between runs."""
    return Path(platformdirs.user_cache_dir("hearth")) / "models"


def run_demo() -> None:
    console = Console()
    console.rule("Hearth demo (foundation)")
    with console.status("making the tiny test models (random weights)"):
        bf16, q4 = make_tiny(models_dir())
    from hearth.protocol.model.loader import load_llama

    for path in (bf16, q4):
        llm = load_llama(path, n_ctx=512)
        t0 = time.perf_counter()
        out = llm.create_completion("Hello", max_tokens=16, temperature=0.0)
        ms = (time.perf_counter() - t0) * 1000
        console.print(
            f"[bold]{path.name}[/]: 16 tokens in {ms:.0f} ms "
            f"(random weights, so the text is noise): {out['choices'][0]['text']!r}"
        )

    with tempfile.TemporaryDirectory(prefix="hearth-demo-") as tmp:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "hearth.protocol.transport.probe", "demo", tmp]
        console.print("\nTwo processes on loopback, one private swarm:")
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            console.print(result.stderr[-2000:])
            raise SystemExit(result.returncode)
        for line in result.stdout.splitlines():
            event = json.loads(line)
            console.print(
                f"  {event['step']}: [bold]{event['outcome']}[/] {event.get('detail', '')}"
            )
    console.print(
        "\nNot built yet: pairing, remote planning and the phone-side executor "
        "(see the open issues). For real answers later: `hearth models pull botpsy-0.8b`."
    )
