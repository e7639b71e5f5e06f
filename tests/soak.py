"""Soak (issue 33; not run by CI): a home node and a resident companion under a steady
mixed load, sampled every 10 s.

    .venv/bin/python tests/soak.py [--minutes 30] [--rate 1.0] [--every 10] [--warm-up 120]

The home node is the scripted one of `tests/hostile/` on a paired node's identity (so
plans are known without a model), serving search too, with a friend node as the search
exit over an index of a few documents; the phone's local model is the tiny Q4 GGUF the
tests make (random weights). About `--rate` requests a second, in turn: a remote ask
whose plan reads the notes and writes one (approved with `--yes`), the same denied
(`--no`), one that sends a message (approved), a local ask (`--route local`), a 2-hop
`hearth search`, a streamed chat completion on the OpenAI API (`hearth-home`),
`hearth conversations`, `hearth inbox` and `hearth audit --verify`. Sampled: the
companion's, the home node's and the exit's RSS, open file descriptors and threads, the
size of each SQLite file (with its WAL), and the round trip of `GET /api/tools` on the
companion's API (its event loop answers it without a model or a peer: it stands in for
that loop's lag; a `hearth tools` process would measure Python's start-up instead). A
search that finds nothing counts as an error. Each sample is a JSON line on stderr; the
end prints each curve's start after warm-up (`--warm-up` seconds: every kind of request
has run a few times, the kept connections and streams are open) and its end (each the
median of a tenth of the samples), the growth between them, each SQLite file's growth
per request in the first and the second half after warm-up (data grows with the
requests at a steady rate; a leak would grow faster than that), and the errors counted.
`--summarize FILE` prints the same from the sample lines a run wrote.

CLOSING: `*_fds_closing` counts the descriptors of TCP connections the client has closed
but the server not yet: Hypercorn closes an idle keep-alive connection's socket only when
its keep-alive timer ends (30 s on the companion's API), even after the client's FIN, so
3 to 5 of the companion's descriptors come and go with the API's clients (the samples'
HTTP client and the OpenAI client each drop an idle connection after 5 s): a change of
the fd count within them is no leak.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import openai
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `tests` as a package, run as a script from anywhere

from hearth.companion.api import api_token  # noqa: E402
from hearth.companion.swarmkit import BIN, Processes, start_companion  # noqa: E402
from hearth.protocol.model.tiny import make_tiny  # noqa: E402
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
ANSWER = Script(rounds=[], answer="Soaked through, word by word.")
API = "api stream"  # not a command: a streamed chat completion on the companion's API
LOAD: list[tuple[str, Script | None, tuple[str, ...]]] = [
    ("ask approved", WRITE, ("ask", "soak: write it and then done", "--route", "remote", "--yes")),
    ("ask denied", WRITE, ("ask", "soak: write it and then done", "--route", "remote", "--no")),
    ("ask send", SEND, ("ask", "soak: text it and then done", "--route", "remote", "--yes")),
    ("ask local", None, ("ask", "soak: say hello", "--route", "local")),
    ("search", None, ("search", "sourdough starter", "--hops", "2")),
    (API, ANSWER, ()),
    ("conversations", None, ("conversations",)),
    ("inbox", None, ("inbox",)),
    ("audit", None, ("audit", "--verify")),
]
SMOOTH = 5  # samples at least whose median is a curve's start or end
DOCS = {
    "bread.md": "# Sourdough\nFeed the starter flour and water; bake bread when it bubbles.",
    "kettle.txt": "The kettle boils water for tea.",
}


def command(cmd: tuple[str, ...], phone: Path) -> tuple[int, dict[str, Any]]:
    """`hearth CMD --json` for the phone: its exit status and its last JSON line."""
    result = subprocess.run(
        [str(BIN / "hearth"), *cmd, "--json", "--home", str(phone)],
        capture_output=True,
        text=True,
    )
    try:
        return result.returncode, json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        failure = f"exit {result.returncode} without JSON: {result.stderr[-300:]}"
        return result.returncode, {"error": {"code": "no_json", "message": failure}}


def api_stream(client: openai.OpenAI) -> dict[str, Any]:
    """A streamed chat completion through the home; `{"error": ...}` if it fails or
    ends without text."""
    try:
        chunks = client.chat.completions.create(
            model="hearth-home",
            messages=[{"role": "user", "content": "soak: answer in a few words"}],
            stream=True,
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    except openai.APIError as exc:
        return {"error": {"code": type(exc).__name__, "message": str(exc)}}
    return {} if text.strip() else {"error": {"code": "empty_stream"}}


def sample(phone: Path, pids: dict[str, int], api: httpx.Client, requests: int) -> dict[str, Any]:
    out: dict[str, Any] = {"t": round(time.time(), 1), "requests": requests}
    for name, pid in pids.items():
        proc = psutil.Process(pid)
        out[f"{name}_rss_mib"] = round(proc.memory_info().rss / 2**20, 1)
        out[f"{name}_fds"] = proc.num_fds()
        out[f"{name}_fds_closing"] = sum(  # (see CLOSING in the docstring)
            c.status == psutil.CONN_CLOSE_WAIT for c in proc.net_connections(kind="tcp")
        )
        out[f"{name}_threads"] = proc.num_threads()
    for db in sorted(phone.glob("*.db")):
        wal = db.with_name(db.name + "-wal")
        size = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        out[f"{db.stem}_kib"] = round(size / 1024, 1)
    t0 = time.monotonic()
    api.get("/api/tools").raise_for_status()
    out["loop_lag_ms"] = round((time.monotonic() - t0) * 1000, 1)
    return out


def per_request(samples: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each SQLite file's growth in KiB per request: first half, second half."""
    a, b, c = samples[0], samples[len(samples) // 2], samples[-1]
    return {
        key: [round((b[key] - a[key]) / max(1, b["requests"] - a["requests"]), 2),
              round((c[key] - b[key]) / max(1, c["requests"] - b["requests"]), 2)]
        for key in a
        if key.endswith("_kib")
    }  # fmt: skip


def summary(samples: list[dict[str, Any]], warm_up: float) -> dict[str, Any]:
    """The curves after `warm_up` seconds: their start and end (each the median of the
    first or the last tenth of the samples, at least `SMOOTH`, so one slow round trip or
    one worker thread busy at the moment is no trend), the growth between them, and the
    SQLite files' growth per request."""
    warm = samples[0]["t"] + warm_up
    after = [s for s in samples if s["t"] >= warm] or samples[-1:]
    n = max(SMOOTH, len(after) // 10)
    start, end = (
        {key: statistics.median(s[key] for s in part) for key in after[0]}
        for part in (after[:n], after[-n:])
    )
    growth = {
        key: f"{(end[key] - start[key]) / start[key] * 100:+.1f}%"
        for key in start
        if key not in ("t", "requests") and start[key]
    }
    return {"samples": len(after), "kib_per_request": per_request(after), "start": start,
            "end": end, "growth": growth}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1.0, help="requests a second")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--warm-up", type=float, default=120.0, help="seconds not compared")
    parser.add_argument(
        "--summarize", type=Path, help="only summarize the sample lines a run wrote to stderr"
    )
    args = parser.parse_args()
    if args.summarize:
        lines = [json.loads(line) for line in args.summarize.read_text().splitlines()]
        errors_seen = Counter(line["error"] for line in lines if "error" in line)
        samples_seen = [line for line in lines if "t" in line]
        print(json.dumps({"errors": errors_seen, **summary(samples_seen, args.warm_up)}))
        return 1 if errors_seen else 0
    for signum in (signal.SIGTERM, signal.SIGINT):  # (nohup'd: SIGINT ignored otherwise)
        signal.signal(signum, lambda *_: sys.exit(1))  # the processes are stopped on the way
    errors: Counter[str] = Counter()
    first_messages: dict[str, str] = {}  # each error's first message
    done: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hearth-soak-") as tmp, Processes() as processes:
        root = Path(tmp)
        (root / "docs").mkdir()
        for name, text in DOCS.items():
            (root / "docs" / name).write_text(text)
        _, q4 = make_tiny(root / "models")
        bench = start_bench(processes, root, model=q4, search_docs=root / "docs")
        companion = start_companion(processes, bench.phone)
        token = api_token(bench.phone)
        client = openai.OpenAI(
            base_url=f"{companion.ready['api']}/v1", api_key=token, max_retries=0, timeout=120
        )
        api = httpx.Client(
            base_url=companion.ready["api"], headers={"Authorization": f"Bearer {token}"}
        )
        node_pid = next(p.pid for p in processes.started if "tests.hostile.node" in p.args)
        exit_pid = next(p.pid for p in processes.started if str(root / "exit") in p.args)
        pids = {"companion": companion.proc.pid, "node": node_pid, "exit": exit_pid}
        end = time.monotonic() + args.minutes * 60
        next_sample = time.monotonic()
        for kind, script, cmd in itertools.cycle(LOAD):
            now = time.monotonic()
            if now >= end:
                break
            if now >= next_sample:
                samples.append(sample(bench.phone, pids, api, done.total()))
                print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
                next_sample += args.every
            if script is not None:
                bench.script.write_text(script.model_dump_json())
            started = time.monotonic()
            code, answer = (0, api_stream(client)) if kind == API else command(cmd, bench.phone)
            if kind == "search" and not answer.get("results", True):
                answer = {"error": {"code": "no_results"}}
            if "error" in answer and not (kind == "ask denied" and code == 8):
                key = f"{kind}: {answer['error']['code']}"
                errors[key] += 1
                first_messages.setdefault(key, str(answer["error"].get("message", "")))
                print(json.dumps({"error": key, "message": first_messages[key]}), file=sys.stderr)
            done[kind] += 1
            time.sleep(max(0.0, 1 / args.rate - (time.monotonic() - started)))
    report = {"requests": dict(done), "errors": dict(errors), "messages": first_messages}
    print(json.dumps({**report, **summary(samples, args.warm_up)}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
