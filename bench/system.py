"""Cold start, pairing, failover and memory: whole commands, side by side.

    .venv/bin/python bench/system.py [--runs 5]

cold start: `hearth ask` process start → first streamed token from the node, against a
fresh Python process streaming the same request from llama-server (xllamacpp).
pairing: `hearth-node invite` → `hearth pair` done. failover: with the node killed,
`hearth ask --route auto` → local answer, against `hearth ask --route local`.
memory: RSS of the idle node and of the reference server (a Python process embedding
llama-server; tiny model loaded, after one request), and peak RSS of a local
`hearth ask` (the companion with its model).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from hearth.companion.swarmkit import Processes, last_json, run, start_node
from hearth.protocol.model.tiny import make_tiny

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(HERE))
from connect import stats  # noqa: E402
from offload import start_reference  # noqa: E402

REF_COLD = """
import sys, time, json
t0 = float(sys.argv[2])
import httpx
with httpx.stream("POST", sys.argv[1] + "/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": "note milk"}], "stream": True,
        "max_tokens": 64, "temperature": 0}) as r:
    for line in r.iter_lines():
        if '"content"' in line:
            print(time.time() - t0)
            break
"""


def side_by_side(ours: list[float], reference: list[float]) -> dict[str, float | int]:
    """Medians, p90s, ratio and runs of two sample sets measured in the same run."""
    o, r = stats(ours), stats(reference)
    return {
        "hearth": o["median"],
        "reference": r["median"],
        "hearth_p90": o["p90"],
        "reference_p90": r["p90"],
        "ratio": o["median"] / r["median"],
        "runs": o["runs"],
    }


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# loopback only: the phone does not browse mDNS on this machine's LAN during the bench
ENV = {**os.environ, "HEARTH_NO_MDNS": "1"}
# as on a terminal (rich's TTY_COMPATIBLE): an answer streams on stderr; through a pipe
# it comes once, at the end
TERMINAL = {**ENV, "TTY_COMPATIBLE": "1"}


def hearth(*args: str, stdin: str | None = None) -> dict:
    return last_json(run("hearth", *args, stdin=stdin, env=ENV))


def first_token_s(*args: str, env: dict[str, str] = ENV) -> float:
    """Process start → its first byte on stderr (where a streamed answer goes)."""
    t0 = time.time()
    proc = subprocess.Popen(
        [str(BIN / "hearth"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stderr is not None
    proc.stderr.read(1)
    elapsed = time.time() - t0
    proc.communicate(timeout=120)
    return elapsed


def timed(*args: str) -> float:
    t0 = time.time()
    subprocess.run(
        [str(BIN / "hearth"), *args], capture_output=True, timeout=300, check=True, env=ENV
    )
    return time.time() - t0


def peak_rss_kb(*args: str) -> int:
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%M", str(BIN / "hearth"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    return int(out.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "system.json")
    args = parser.parse_args()
    report: dict[str, dict] = {}
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp, Processes() as processes:
        root = Path(tmp)
        bf16, q4 = make_tiny(root / "models")
        try:
            reference, port = start_reference("llama-server", bf16)
            procs.append(reference)
            node = start_node(processes, root / "node", "--model", str(bf16))
            phone = root / "phone"
            hearth("init", "--model", str(q4), "--json", "--home", str(phone))
            pair_s = []
            for i in range(args.runs):
                uri = node.invite()
                extra = root / f"extra{i}"
                if i:
                    hearth("init", "--json", "--home", str(extra))
                t0 = time.time()
                hearth(
                    "pair",
                    "-",
                    "--json",
                    "--home",
                    str(phone if not i else extra),
                    stdin=uri + "\n",
                )
                pair_s.append(time.time() - t0)
            ask = ("ask", "note milk", "--yes", "--json", "--home", str(phone))
            cold = [  # an answer in text, as the reference's: its first piece on stderr
                first_token_s(*ask, "--route", "remote", "--tool-choice", "none", env=TERMINAL)
                for _ in range(args.runs)
            ]
            ref_cold = []
            for _ in range(args.runs):
                out = subprocess.run(
                    [sys.executable, "-c", REF_COLD, f"http://127.0.0.1:{port}", str(time.time())],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=True,
                )
                ref_cold.append(float(out.stdout.strip()))
            report["cold start: process start → first token, s"] = side_by_side(cold, ref_cold)
            node_rss = rss_kb(node.proc.pid)
            ref_rss = rss_kb(procs[0].pid)
            companion_rss = peak_rss_kb(*ask, "--route", "local")
            report["memory: RSS, MiB (tiny model loaded)"] = {
                "hearth-node idle": node_rss / 1024,
                "hearth ask --route local (peak)": companion_rss / 1024,
                "reference": ref_rss / 1024,
                "ratio": node_rss / ref_rss,
                "runs": 1,
            }
            local = [timed(*ask, "--route", "local") for _ in range(args.runs)]
            os.kill(node.proc.pid, signal.SIGKILL)
            node.proc.wait()
            failover = [timed(*ask, "--route", "auto") for _ in range(args.runs)]
            report["failover: node killed → local answer (whole command), s"] = {
                **side_by_side(failover, local),
                "reference_is": "hearth ask --route local with the node up",
            }
            report["pairing: invite → pair complete (whole command), s"] = {
                "hearth": median(pair_s),
                "hearth_p90": stats(pair_s)["p90"],
                "runs": args.runs,
            }
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
    for name, row in report.items():
        print(
            name,
            json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}),
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
