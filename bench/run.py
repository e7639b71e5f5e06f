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
from typing import Any, NamedTuple

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


class Row(NamedTuple):
    figure: str
    hearth: dict[str, Any]
    reference: dict[str, Any]
    ratio: float | None
    reference_is: str


def as_stats(value: Any) -> dict[str, Any]:
    """{median, p90, runs} from a stats dict, a bare number or None."""
    if isinstance(value, dict):
        return {"median": value["median"], "p90": value.get("p90"), "runs": value.get("runs")}
    return {"median": value, "p90": None, "runs": None}


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument(
        "--table-only", action="store_true", help="reprint the table from bench/results"
    )
    args = parser.parse_args()
    runs = {
        "connect.py": ["--runs", "5" if args.quick else "10"],
        "offload.py": ["--runs", "8" if args.quick else "20"],
        "system.py": ["--runs", "3" if args.quick else "5"],
        "load.py": ["--phones", "1,4,16" if args.quick else "1,4,16,64"],
        "swarm.py": ["--runs", "8" if args.quick else "20"],
    }
    for script, extra in {} if args.table_only else runs.items():
        Console(stderr=True).print(f"[dim]running {script}…[/]")
        subprocess.run(
            [sys.executable, str(HERE / script), *extra], check=True, stdout=subprocess.DEVNULL
        )
    connect = json.loads((RESULTS / "connect.json").read_text())
    offload = json.loads((RESULTS / "offload.json").read_text())
    system = json.loads((RESULTS / "system.json").read_text())
    load = json.loads((RESULTS / "load.json").read_text())
    swarm = json.loads((RESULTS / "swarm.json").read_text())
    rows: list[Row] = []

    def add(name: str, ours: Any, ref: Any, what: str) -> None:
        """`ours`/`ref`: a {median, p90, runs} dict, a bare number, or None."""
        o, r = as_stats(ours), as_stats(ref)
        ratio = o["median"] / r["median"] if r["median"] else None
        rows.append(Row(name, o, r, ratio, what))

    add(
        "connect: dial + first stream (ms)",
        connect["connect_ms"]["hearth"],
        connect["connect_ms"]["reference"],
        "plain py-libp2p TCP+Noise+Yamux, fresh process",
    )
    add(
        "connect through a relay friend (ms)",
        swarm["connect through a relay friend"]["hearth"],
        swarm["connect through a relay friend"]["reference"],
        "plain py-libp2p direct dial + first stream",
    )
    add(
        "small-frame round trip (ms)",
        connect["rtt_ms_median"]["hearth"],
        connect["rtt_ms_median"]["reference"],
        "plain py-libp2p echo",
    )
    add(
        "offload: one plan round, llama-cpp backend (ms)",
        offload["hearth"],
        offload["reference"],
        "llama-cpp-python server, same GGUF/prompt/grammar",
    )
    add(
        "offload: one plan round, upstream backend (ms)",
        offload["hearth-upstream"],
        offload["reference"],
        "the same server, called directly",
    )
    add(
        "streaming: time to first token (ms)",
        offload["hearth"]["ttft_ms"],
        offload["reference-stream"]["ttft_ms"],
        "the server's SSE stream",
    )
    add(
        "streaming: whole streamed round (ms)",
        offload["hearth"]["streamed_total_ms"],
        offload["reference-stream"]["streamed_total_ms"],
        "the server's SSE stream, one chunk per token",
    )
    per_token = {  # after the first token: (whole round - TTFT) / the other tokens
        side: (offload[side]["streamed_total_ms"] - offload[side]["ttft_ms"])
        / (offload["hearth"]["tokens"] - 1)
        for side in ("hearth", "reference-stream")
    }
    add(
        "streaming: per-token overhead after the first (ms/token)",
        per_token["hearth"],
        per_token["reference-stream"],
        "the server's SSE stream",
    )
    for key, name, what in (
        (
            "cold start: process start → first token, s",
            "cold start: process → first token (s)",
            "fresh python + httpx streaming from the server",
        ),
        (
            "failover: node killed → local answer (whole command), s",
            "failover: node killed → local answer (s)",
            "hearth ask --route local, node up",
        ),
    ):
        fig = system[key]
        add(
            name,
            {"median": fig["hearth"], "p90": fig.get("hearth_p90"), "runs": fig["runs"]},
            {"median": fig["reference"], "p90": fig.get("reference_p90"), "runs": fig["runs"]},
            what,
        )
    mem = system["memory: RSS, MiB (tiny model loaded)"]
    add(
        "memory: idle node RSS (MiB)",
        mem["hearth-node idle"],
        mem["reference"],
        "reference server RSS",
    )
    add(
        "memory: companion peak RSS, local ask (MiB)",
        mem["hearth ask --route local (peak)"],
        mem["reference"],
        "reference server RSS",
    )
    for n, fig in load.items():
        ours, theirs = fig["hearth"], fig["reference"]
        add(
            f"load: {n} phone(s) at once, sessions/s",
            ours["per_s"],
            theirs["per_s"],
            f"reference server, same concurrency (Hearth busy: {ours['errors'].get('busy', 0)}, "
            f"p99 queue wait {ours.get('queue_wait_p99_ms', 0):.0f} ms)",
        )
    for hops in (2, 3):
        fig = swarm[f"search {hops} hops"]
        add(
            f"search, {hops} hops (ms)",
            fig["hearth"],
            fig["reference"],
            "direct FTS5 query on the same index",
        )
    pair = system["pairing: invite → pair complete (whole command), s"]
    add(
        "pairing: invite → pair complete (s)",
        {"median": pair["hearth"], "p90": pair.get("hearth_p90"), "runs": pair["runs"]},
        None,
        "—",
    )
    table = Table(title="Hearth benchmarks (ratio = Hearth median / reference median)")
    for col in ("figure", "Hearth", "p90", "reference", "p90 ", "ratio", "runs", "reference is"):
        table.add_column(col)
    for row in rows:
        table.add_row(
            row.figure,
            fmt(row.hearth["median"]),
            fmt(row.hearth["p90"]),
            fmt(row.reference["median"]),
            fmt(row.reference["p90"]),
            fmt(row.ratio),
            str(row.hearth["runs"] or "—"),
            row.reference_is,
        )
    console = Console(width=150)
    console.print(table)
    info = machine()
    console.print(info)
    (RESULTS / "all.json").write_text(
        json.dumps(
            {
                "machine": info,
                "rows": [row._asdict() for row in rows],
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
