"""Soak (issue 33; not run by CI): a home node and a resident companion under a steady
mixed load, sampled every 10 s.

    .venv/bin/python tests/soak.py [--minutes 30] [--rate 1.0] [--every 10]

The home node is the scripted one of `tests/hostile/` on a paired node's identity (so
plans are known without a model). About `--rate` requests a second, in turn: a remote
ask whose plan reads the notes and writes one (approved with `--yes`), the same denied
(`--no`), one that sends a message (approved), `hearth conversations`, `hearth inbox`
and `hearth audit --verify`. Sampled: the companion's and the node's RSS, open file
descriptors and threads, the size of each SQLite file (with its WAL), and the
round trip of a `tools` request through companion.sock (the companion's event loop
answers it: it stands in for that loop's lag). Each sample is a JSON line on stderr;
the end prints the first sample after warm-up (the second), the last, and the growth of
each figure between them, and the errors counted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `tests` as a package, run as a script from anywhere

from hearth.companion.swarmkit import BIN, Processes, start_companion  # noqa: E402
from hearth.protocol.wire.messages import PlanStep  # noqa: E402
from tests.hostile.harness import start_bench  # noqa: E402
from tests.hostile.script import Round, Script  # noqa: E402

WRITE = Script(
    rounds=[
        Round(
            steps=[
                PlanStep(id="s1", tool="notes_search", arguments={"query": "soak"}),
                PlanStep(id="s2", tool="notes_create", arguments={"text": "soak {request_id}"}),
            ]
        )
    ]
)
SEND = Script(
    rounds=[
        Round(steps=[PlanStep(id="s1", tool="message_send", arguments={"to": "+1", "body": "x"})])
    ]
)
LOAD: list[tuple[str, Script | None, tuple[str, ...]]] = [
    ("ask approved", WRITE, ("ask", "soak: write it and then done", "--route", "remote", "--yes")),
    ("ask denied", WRITE, ("ask", "soak: write it and then done", "--route", "remote", "--no")),
    ("ask send", SEND, ("ask", "soak: text it and then done", "--route", "remote", "--yes")),
    ("conversations", None, ("conversations",)),
    ("inbox", None, ("inbox",)),
    ("audit", None, ("audit", "--verify")),
]


def sample(phone: Path, pids: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"t": round(time.time(), 1)}
    for name, pid in pids.items():
        proc = psutil.Process(pid)
        out[f"{name}_rss_mib"] = round(proc.memory_info().rss / 2**20, 1)
        out[f"{name}_fds"] = proc.num_fds()
        out[f"{name}_threads"] = proc.num_threads()
    for db in sorted(phone.glob("*.db")):
        wal = db.with_name(db.name + "-wal")
        size = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        out[f"{db.stem}_kib"] = round(size / 1024, 1)
    t0 = time.monotonic()
    subprocess.run(
        [str(BIN / "hearth"), "tools", "--json", "--home", str(phone)],
        capture_output=True,
        check=True,
    )
    out["tools_round_trip_ms"] = round((time.monotonic() - t0) * 1000, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1.0, help="requests a second")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    args = parser.parse_args()
    errors: Counter[str] = Counter()
    done: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hearth-soak-") as tmp, Processes() as processes:
        bench = start_bench(processes, Path(tmp))
        companion = start_companion(processes, bench.phone)
        node_pid = next(p.pid for p in processes.started if "tests.hostile.node" in p.args)
        pids = {"companion": companion.proc.pid, "node": node_pid}
        end = time.monotonic() + args.minutes * 60
        next_sample = time.monotonic()
        for kind, script, cmd in itertools.cycle(LOAD):
            now = time.monotonic()
            if now >= end:
                break
            if now >= next_sample:
                samples.append(sample(bench.phone, pids))
                print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
                next_sample += args.every
            if script is not None:
                bench.script.write_text(script.model_dump_json())
            started = time.monotonic()
            result = subprocess.run(
                [str(BIN / "hearth"), *cmd, "--json", "--home", str(bench.phone)],
                capture_output=True,
                text=True,
            )
            answer = json.loads(result.stdout.strip().splitlines()[-1] or "{}")
            if "error" in answer and not (kind == "ask denied" and result.returncode == 8):
                errors[f"{kind}: {answer['error']['code']}"] += 1
            done[kind] += 1
            time.sleep(max(0.0, 1 / args.rate - (time.monotonic() - started)))
    first, last = (samples[1] if len(samples) > 2 else samples[0]), samples[-1]
    growth = {
        key: f"{(last[key] - first[key]) / first[key] * 100:+.1f}%"
        for key in first
        if key != "t" and isinstance(first[key], int | float) and first[key]
    }
    print(json.dumps({"requests": dict(done), "errors": dict(errors), "after_warm_up": first,
                      "end": last, "growth": growth}))  # fmt: skip
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
