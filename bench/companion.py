"""Issue 18's table: the resident companion (`hearth serve`) side by side with the
OpenAI-compatible servers people run, in one run.

    .venv/bin/python bench/companion.py [--runs 5]

References: llama.cpp's server (`llama-server`, embedded by xllamacpp) and llama-cpp-python's
server, both serving the phone's tiny Q4 GGUF, asked the same prompt with the same token
limit and sampling (seeded). Figures (medians of `--runs`, alternating sides every run):
1. `hearth ask` process start → first streamed token (thin client, companion running), against
   a fresh Python process streaming the request from each server with httpx. `hearth ask`
   samples greedily (it has no sampling option) and runs as on a terminal (TTY_COMPATIBLE):
   its first byte on stderr is its view drawn at the first token (`…`: the tiny model's
   answer is whitespace, which shows nothing else);
2. warm local answer: API request → first token (`hearth-local`, streamed), against the
   servers answering on a kept connection;
3. remote answer through the API over the kept link (`hearth-home`, whole answer), against the
   in-process remote round of a one-shot `hearth ask --route remote` (its `timings.total_ms`,
   process start excluded) on a second phone paired to the same node;
4. failover: node killed → `hearth ask --route auto` answered locally, against `hearth ask
   --route local`, both through the companion;
5. idle RSS of `hearth serve` with the Q4 model loaded (after the asks) against each server's;
6. CPU per request beyond the model's own decode, per route: the process CPU of the companion
   (local) or of the companion and the node (remote) over twice `--runs` streamed API answers,
   less the process CPU inside `llama_decode` (both run under `bench/decode_timed.py`).
The load average (1 min) is recorded with every figure: the machine may be shared.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from hearth.companion.swarmkit import (
    Processes,
    init_phone,
    last_json,
    pair,
    run,
    start_companion,
    start_node,
)
from hearth.protocol.model.tiny import make_tiny

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(HERE))
from connect import stats  # noqa: E402
from offload import start_reference  # noqa: E402
from system import TERMINAL, first_token_s, rss_kb  # noqa: E402

PROMPT = "note milk"
MAX_TOKENS = 64
# Sampled, not greedy: greedily, the tiny random-weight model answers only control characters
# (which Hearth shows no one), so no side would stream a first token. Same seed and
# temperature on every side: each streams visible text from its first token on.
SAMPLING = {"temperature": 1.0, "seed": 7}
SERVERS = ("llama-server", "llama-cpp-python")
ENV = {**os.environ, "HEARTH_NO_MDNS": "1"}  # loopback only


def body(model: str) -> dict[str, Any]:
    """The one chat request every side answers (the servers ignore `model`, Hearth's API
    ignores the sampling fields it does not take)."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "max_tokens": MAX_TOKENS,
        **SAMPLING,
        "tool_choice": "none",
    }


def generated(chunk: str) -> bool:
    """Whether a chat completion chunk carries a generated token: answer text, or thinking
    (llama-server streams this model's tokens as `reasoning_content`)."""
    choices = json.loads(chunk).get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    return bool(delta.get("content") or delta.get("reasoning_content"))


# a fresh Python process: argv[2] (its start time) → first generated token from argv[1]
COLD_CLIENT = f"""
import json, sys, time
t0 = float(sys.argv[2])
import httpx
import psutil
body = {{"messages": [{{"role": "user", "content": {PROMPT!r}}}], "stream": True,
        "max_tokens": {MAX_TOKENS}, **{SAMPLING!r}, "tool_choice": "none"}}
with httpx.stream("POST", sys.argv[1] + "/v1/chat/completions", json=body, timeout=120) as r:
    for line in r.iter_lines():
        if line.startswith("data: {{"):
            delta = (json.loads(line[6:]).get("choices") or [{{}}])[0].get("delta") or {{}}
            if delta.get("content") or delta.get("reasoning_content"):
                print(time.time() - t0)
                break
"""


def streamed(client: httpx.Client, url: str, model: str) -> tuple[float, float]:
    """(first content token, whole answer) in ms of one streamed chat completion."""
    t0 = time.perf_counter()
    first: float | None = None
    with client.stream("POST", url + "/v1/chat/completions", json=body(model)) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if first is None and line.startswith("data: {") and generated(line[6:]):
                first = time.perf_counter()
    end = time.perf_counter()
    if first is None:
        raise RuntimeError(f"{url} ({model}) streamed no content")
    return (first - t0) * 1000, (end - t0) * 1000


def ref_cold_s(url: str) -> float:
    """A fresh Python process: start → first token streamed from `url` with httpx."""
    out = subprocess.run(
        [sys.executable, "-c", COLD_CLIENT, url, str(time.time())],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(out.stdout.strip())


def decode_cpu_s(proc: subprocess.Popen[str], decode_file: Path) -> float:
    """CPU seconds `proc` (run under bench/decode_timed.py) spent in llama_decode so far."""
    decode_file.unlink(missing_ok=True)
    os.kill(proc.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while not decode_file.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {proc.pid} did not report its decode time")
        time.sleep(0.01)
    return float(decode_file.read_text())


def beyond_decode_s(procs: dict[subprocess.Popen[str], Path]) -> float:
    """CPU seconds these processes spent so far, less their time inside llama_decode."""
    total = 0.0
    for proc, decode_file in procs.items():
        times = psutil.Process(proc.pid).cpu_times()
        total += times.user + times.system - decode_cpu_s(proc, decode_file)
    return total


def whole_command_s(*args: str) -> float:
    t0 = time.perf_counter()
    run("hearth", *args, env=ENV)
    return time.perf_counter() - t0


def alternate(runs: int, sides: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Every side once per run, in turn, so load drifts hit them alike."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(runs):
        for name, measure in sides.items():
            samples[name].append(measure())
    return samples


def figure(samples: dict[str, list[float]], ours: str, unit: str) -> dict[str, Any]:
    """Medians/p90s of every side, each reference's ratio (ours / it), the load average."""
    out: dict[str, Any] = {"unit": unit, "load_1min": round(os.getloadavg()[0], 2)}
    for name, values in samples.items():
        out[name] = stats(values)
    for name in samples:
        if name != ours:
            out[f"ratio vs {name}"] = out[ours]["median"] / out[name]["median"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "companion.json")
    args = parser.parse_args()
    report: dict[str, Any] = {"load_1min_at_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as tmp, Processes() as processes:
        root = Path(tmp)
        bf16, q4 = make_tiny(root / "models")
        servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        try:
            for kind in SERVERS:
                proc, port = start_reference(kind, q4)
                servers[kind] = (proc, f"http://127.0.0.1:{port}")
            timed = {name: root / f"{name}.decode" for name in ("node", "companion")}

            def decode_timed(name: str) -> tuple[str, ...]:
                return (sys.executable, str(HERE / "decode_timed.py"), str(timed[name]))

            node = start_node(
                processes, root / "node", "--model", str(bf16), prefix=decode_timed("node")
            )
            phone, other = root / "phone", root / "other"
            for home in (phone, other):
                init_phone(home, q4)
                pair(home, node.invite())
            companion = start_companion(processes, phone, prefix=decode_timed("companion"))
            api = str(companion.ready["api"])
            token = (phone / "api.token").read_text().strip()
            ask = ("ask", PROMPT, "--tool-choice", "none", "--yes", "--json", "--home")
            with (
                httpx.Client(timeout=120, headers={"Authorization": f"Bearer {token}"}) as hearth,
                httpx.Client(timeout=120) as plain,
            ):
                for model in ("hearth-local", "hearth-home"):  # load the model, dial the node
                    streamed(hearth, api, model)
                for _, url in servers.values():
                    streamed(plain, url, "reference")

                cold = alternate(
                    args.runs,
                    {
                        "hearth ask (thin client)": lambda: first_token_s(
                            *ask, str(phone), "--route", "local", env=TERMINAL
                        ),
                        **{
                            kind: (lambda url=url: ref_cold_s(url))
                            for kind, (_, url) in servers.items()
                        },
                    },
                )
                report["process start → first token"] = figure(
                    cold, "hearth ask (thin client)", "s"
                )

                warm: dict[str, list[float]] = {"companion (hearth-local)": []}
                warm.update({kind: [] for kind in servers})
                whole: dict[str, list[float]] = {kind: [] for kind in servers}
                for _ in range(args.runs):
                    warm["companion (hearth-local)"].append(
                        streamed(hearth, api, "hearth-local")[0]
                    )
                    for kind, (_, url) in servers.items():
                        first, total = streamed(plain, url, "reference")
                        warm[kind].append(first)
                        whole[kind].append(total)
                report["warm local answer: request → first token"] = figure(
                    warm, "companion (hearth-local)", "ms"
                )

                remote: dict[str, list[float]] = {
                    "companion API (hearth-home, kept link)": [],
                    "in-process remote round (hearth ask, one-shot)": [],
                }
                for _ in range(args.runs):
                    remote["companion API (hearth-home, kept link)"].append(
                        streamed(hearth, api, "hearth-home")[1]
                    )
                    one_shot = last_json(
                        run("hearth", *ask, str(other), "--route", "remote", env=ENV)
                    )
                    remote["in-process remote round (hearth ask, one-shot)"].append(
                        float(one_shot["timings"]["total_ms"])
                    )
                report["remote answer, whole"] = {
                    **figure(remote, "companion API (hearth-home, kept link)", "ms"),
                    "servers, whole local answer (ms)": {k: stats(v) for k, v in whole.items()},
                }

                beyond: dict[str, Any] = {"unit": "ms", "requests": 2 * args.runs}
                for route, model, procs in (
                    ("local (hearth-local)", "hearth-local", {companion.proc: timed["companion"]}),
                    (
                        "remote (hearth-home)",
                        "hearth-home",
                        {companion.proc: timed["companion"], node.proc: timed["node"]},
                    ),
                ):
                    before = beyond_decode_s(procs)
                    for _ in range(2 * args.runs):
                        streamed(hearth, api, model)
                    spent = beyond_decode_s(procs) - before
                    beyond[route] = spent / (2 * args.runs) * 1000
                beyond["load_1min"] = round(os.getloadavg()[0], 2)
                report["CPU per request beyond the model's decode"] = beyond

                time.sleep(2)  # idle
                rss = {"hearth serve": rss_kb(companion.proc.pid) / 1024}
                rss.update({kind: rss_kb(proc.pid) / 1024 for kind, (proc, _) in servers.items()})
                report["idle RSS, Q4 model loaded"] = {
                    "unit": "MiB",
                    "load_1min": round(os.getloadavg()[0], 2),
                    **rss,
                    **{f"ratio vs {k}": rss["hearth serve"] / rss[k] for k in servers},
                }

            os.kill(node.proc.pid, signal.SIGKILL)
            node.proc.wait()
            time.sleep(6)  # beyond the link's keepalive: it knows the node is gone
            failover = alternate(
                args.runs,
                {
                    "hearth ask --route auto": lambda: whole_command_s(
                        *ask, str(phone), "--route", "auto"
                    ),
                    "hearth ask --route local": lambda: whole_command_s(
                        *ask, str(phone), "--route", "local"
                    ),
                },
            )
            report["failover: node killed → local answer (whole command)"] = figure(
                failover, "hearth ask --route auto", "s"
            )
        finally:
            for proc, _ in servers.values():
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
