"""Connect and small-frame round trip: Hearth against plain py-libp2p, in one run.

    .venv/bin/python bench/connect.py [--runs 10] [--frames 50]

Hearth: `probe serve` / `probe ping` (spec pnet + Noise + Yamux + roster gate, typed
msgpack frames). Reference: plain py-libp2p TCP + Noise + Yamux dialling without the
happy-eyeballs delay, echoing raw 32-byte writes. Every client is a fresh process;
connect = dial + first stream. Prints a table (medians, p90, ratios) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median, quantiles

from rich.console import Console
from rich.table import Table

from hearth.companion.swarmkit import KitError, wait_ready
from hearth.protocol.transport.probe import lay_out_homes

HERE = Path(__file__).parent
PROBE = [sys.executable, "-m", "hearth.protocol.transport.probe"]
PLAIN = [sys.executable, str(HERE / "plain_libp2p.py")]


def start(cmd: list[str], ready: Path) -> tuple[subprocess.Popen[bytes], dict]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        return proc, wait_ready(proc, ready, timeout=30)
    except KitError:
        proc.kill()
        raise


def client(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def stats(values: list[float]) -> dict:
    p90 = quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
    return {"median": median(values), "p90": p90, "runs": len(values)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "connect.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        homes = lay_out_homes(Path(tmp))
        hearth, h_ready = start(
            [*PROBE, "serve", str(homes["node"]), "--ready-file", f"{tmp}/h.json"],
            Path(tmp, "h.json"),
        )
        plain, p_ready = start([*PLAIN, "serve", f"{tmp}/p.json"], Path(tmp, "p.json"))
        try:
            results: dict[str, list[dict]] = {"hearth": [], "reference": []}
            for _ in range(args.runs):  # interleaved, so both see the same machine state
                results["hearth"].append(
                    client(
                        [
                            *PROBE,
                            "ping",
                            str(homes["phone"]),
                            h_ready["peer_id"],
                            h_ready["addrs"][0],
                            "--count",
                            str(args.frames),
                        ]
                    )
                )
                results["reference"].append(
                    client([*PLAIN, "ping", p_ready["addrs"][0], str(args.frames)])
                )
        finally:
            for proc in (hearth, plain):
                proc.kill()
                proc.wait()
    report = {}
    for metric in ("connect_ms", "rtt_ms_median"):
        h = stats([r[metric] for r in results["hearth"]])
        ref = stats([r[metric] for r in results["reference"]])
        report[metric] = {"hearth": h, "reference": ref, "ratio": h["median"] / ref["median"]}
    table = Table(title="Hearth vs plain py-libp2p (loopback)")
    for col in (
        "figure",
        "Hearth median",
        "Hearth p90",
        "reference median",
        "reference p90",
        "ratio",
        "runs",
    ):
        table.add_column(col)
    names = {
        "connect_ms": "connect (dial + first stream + its first answer), ms",
        "rtt_ms_median": f"small-frame round trip, ms (median of {args.frames})",
    }
    for metric, row in report.items():
        table.add_row(
            names[metric],
            f"{row['hearth']['median']:.2f}",
            f"{row['hearth']['p90']:.2f}",
            f"{row['reference']['median']:.2f}",
            f"{row['reference']['p90']:.2f}",
            f"{row['ratio']:.2f}",
            str(row["hearth"]["runs"]),
        )
    Console(width=140).print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
