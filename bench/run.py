"""Every benchmark, one command: `.venv/bin/python bench/run.py [--quick]`.

Runs bench/connect.py, offload.py, system.py, load.py and swarm.py (each in temporary homes on
loopback, each against its reference in the same run), then prints one table and
writes bench/results/all.json with the machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).parent
RESULTS = HERE / "results"


def machine() -> dict[str, str | int]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cores": os.cpu_count() or 0,
        "cpu": cpu,
        "python": platform.python_version(),
        "libp2p": version("libp2p"),
        "llama-cpp-python": version("llama-cpp-python"),
        "date": time.strftime("%Y-%m-%d"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    runs = {
        "connect.py": ["--runs", "5" if args.quick else "10"],
        "offload.py": ["--runs", "8" if args.quick else "20"],
        "system.py": ["--runs", "3" if args.quick else "5"],
        "load.py": ["--phones", "1,4,16" if args.quick else "1,4,16,64"],
        "swarm.py": ["--runs", "8" if args.quick else "20"],
    }
    for script, extra in runs.items():
        Console(stderr=True).print(f"[dim]running {script}…[/]")
        subprocess.run(
            [sys.executable, str(HERE / script), *extra], check=True, stdout=subprocess.DEVNULL
        )
    connect = json.loads((RESULTS / "connect.json").read_text())
    offload = json.loads((RESULTS / "offload.json").read_text())
    system = json.loads((RESULTS / "system.json").read_text())
    rows = [
        (
            "connect: dial + first stream (ms)",
            connect["connect_ms"]["hearth"]["median"],
            connect["connect_ms"]["reference"]["median"],
            connect["connect_ms"]["ratio"],
            "plain py-libp2p TCP+Noise+Yamux",
        ),
        (
            "small-frame round trip (ms)",
            connect["rtt_ms_median"]["hearth"]["median"],
            connect["rtt_ms_median"]["reference"]["median"],
            connect["rtt_ms_median"]["ratio"],
            "plain py-libp2p echo",
        ),
        (
            "offload: one plan round, llama-cpp backend (ms)",
            offload["hearth"]["median"],
            offload["reference"]["median"],
            offload["hearth"]["ratio"],
            "llama-cpp-python server, same GGUF/prompt/grammar",
        ),
        (
            "offload: one plan round, upstream backend (ms)",
            offload["hearth-upstream"]["median"],
            offload["reference"]["median"],
            offload["hearth-upstream"]["ratio"],
            "the same server, called directly",
        ),
    ]
    rows.append(
        (
            "streaming: time to first token (ms)",
            offload["hearth"]["ttft_ms"],
            offload["reference-stream"]["ttft_ms"],
            offload["hearth"]["ttft_ms"] / offload["reference-stream"]["ttft_ms"],
            "the server's SSE stream",
        )
    )
    rows.append(
        (
            "streaming: whole streamed round (ms)",
            offload["hearth"]["streamed_total_ms"],
            offload["reference-stream"]["streamed_total_ms"],
            offload["hearth"]["streamed_total_ms"]
            / offload["reference-stream"]["streamed_total_ms"],
            "the server's SSE stream, one chunk per token",
        )
    )
    cold = system["cold start: process start → first token, s"]
    rows.append(
        (
            "cold start: process → first token (s)",
            cold["hearth"],
            cold["reference"],
            cold["ratio"],
            "fresh python + httpx streaming from the server",
        )
    )
    fail = system["failover: node killed → local answer (whole command), s"]
    rows.append(
        (
            "failover: node killed → local answer (s)",
            fail["hearth"],
            fail["reference"],
            fail["ratio"],
            "hearth ask --route local, node up",
        )
    )
    mem = system["memory: RSS, MiB (tiny model loaded)"]
    rows.append(
        (
            "memory: idle node RSS (MiB)",
            mem["hearth-node idle"],
            mem["reference"],
            mem["ratio"],
            "reference server RSS",
        )
    )
    rows.append(
        (
            "memory: companion peak RSS, local ask (MiB)",
            mem["hearth ask --route local (peak)"],
            mem["reference"],
            mem["hearth ask --route local (peak)"] / mem["reference"],
            "reference server RSS",
        )
    )
    load = json.loads((RESULTS / "load.json").read_text())
    for n, row in load.items():
        ours, theirs = row["hearth"], row["reference"]
        rows.append(
            (
                f"load: {n} phone(s) at once, sessions/s",
                ours["per_s"],
                theirs["per_s"],
                ours["per_s"] / theirs["per_s"],
                f"reference server, same concurrency (Hearth busy: "
                f"{ours['errors'].get('busy', 0)})",
            )
        )
    swarm = json.loads((RESULTS / "swarm.json").read_text())
    for name, what in (
        ("connect through a relay friend", "plain py-libp2p direct dial + first stream"),
        ("search 2 hops", "direct FTS5 query on the same index"),
        ("search 3 hops", "direct FTS5 query on the same index"),
    ):
        row = swarm[name]
        rows.append(
            (
                f"{name} (ms)",
                row["hearth"]["median"],
                row["reference"]["median"],
                row["ratio"],
                what,
            )
        )
    pair = system["pairing: invite → pair complete (whole command), s"]
    rows.append(("pairing: invite → pair complete (s)", pair["hearth"], None, None, "—"))
    table = Table(title="Hearth benchmarks (medians; ratio = Hearth / reference)")
    for col in ("figure", "Hearth", "reference", "ratio", "reference is"):
        table.add_column(col)
    for name, ours, ref, ratio, what in rows:
        table.add_row(
            name,
            f"{ours:.2f}",
            "—" if ref is None else f"{ref:.2f}",
            "—" if ratio is None else f"{ratio:.2f}",
            what,
        )
    console = Console(width=150)
    console.print(table)
    info = machine()
    console.print(info)
    (RESULTS / "all.json").write_text(
        json.dumps(
            {
                "machine": info,
                "rows": [
                    dict(
                        zip(
                            ("figure", "hearth", "reference", "ratio", "reference_is"),
                            r,
                            strict=True,
                        )
                    )
                    for r in rows
                ],
                "connect": connect,
                "offload": offload,
                "system": system,
                "load": load,
                "swarm": swarm,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
