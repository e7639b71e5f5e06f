"""Offload overhead: a one-round Hearth plan session against the same request to the
same tiny GGUF behind llama-cpp-python's own OpenAI-compatible server.

    .venv/bin/python bench/offload.py [--runs 20]

Same prompt, tool schemas, grammar, greedy sampling and token limit on both sides;
both keep their connection between requests. Hearth: request → signed ActionPlan
over libp2p (pnet + Noise + Yamux), with the node's llama-cpp backend and with its
upstream backend pointed at the reference server. Reference: one non-streaming
chat completion through httpx. Prints medians, p90 and ratios; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median, quantiles

import anyio
import httpx
import trio
from rich.console import Console
from rich.table import Table

from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.tiny import make_tiny
from hearth.protocol.transport.host import HearthHost, host_for_home, quiet_libp2p
from hearth.protocol.transport.keys import create_identity
from hearth.protocol.transport.pairing import redeem, store_pairing
from hearth.protocol.transport.plans import PLAN_PROTOCOL
from hearth.protocol.wire.invite import parse_invite
from hearth.protocol.wire.messages import (
    ActionPlan,
    ChatMessage,
    Limits,
    PlanRequest,
    Token,
    ToolSpec,
)
from hearth.protocol.wire.session import PlanSession, Side

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
TOOLS = [
    ToolSpec.model_validate(
        {
            "function": {
                "name": "notes_create",
                "description": "Make a note",
                "parameters": {
                    "type": "object",
                    "properties": {"text": {"type": "string", "maxLength": 24}},
                    "required": ["text"],
                },
            }
        }
    ),
    ToolSpec.model_validate(
        {
            "function": {
                "name": "alarm_set",
                "description": "Set an alarm",
                "parameters": {
                    "type": "object",
                    "properties": {"minutes": {"type": "integer", "minimum": 0, "maximum": 99}},
                    "required": ["minutes"],
                },
            }
        }
    ),
]
SCHEMAS = {t.function.name: dict(t.function.parameters) for t in TOOLS}
PROMPT = "Note that we need milk, then wake me in five minutes."
MAX_TOKENS = 256
MAX_CALLS = 2


def stats(values: list[float]) -> dict:
    p90 = quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
    return {"median": median(values), "p90": p90, "runs": len(values)}


def wait_ready(path: Path, proc: subprocess.Popen, what: str) -> dict:
    deadline = time.monotonic() + 120
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)
    return json.loads(path.read_text())


def start_reference(model: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--n_threads",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("reference server did not start")


def start_node(home: Path, *args: str) -> tuple[subprocess.Popen, dict]:
    subprocess.run(
        [str(BIN / "hearth-node"), "init", "--home", str(home)], check=True, capture_output=True
    )
    proc = subprocess.Popen(
        [
            str(BIN / "hearth-node"),
            "serve",
            "--home",
            str(home),
            "--listen",
            "/ip4/127.0.0.1/tcp/0",
            "--no-mdns",
            "--ready-file",
            str(home / "ready.json"),
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, wait_ready(home / "ready.json", proc, "hearth-node")


def pair(node_home: Path, phone_home: Path) -> None:
    uri = json.loads(
        subprocess.run(
            [str(BIN / "hearth-node"), "invite", "--json", "--home", str(node_home)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )["uri"]
    key = create_identity(phone_home)
    result, _ = trio.run(redeem, parse_invite(uri), key, "bench", "phone")
    store_pairing(phone_home, result)


def phone_host(phone_home: Path) -> HearthHost:
    return host_for_home(phone_home).host


async def one_round(host: HearthHost, node: dict, i: int) -> dict:
    """request → signed ActionPlan on a new stream of the kept connection."""
    request = PlanRequest(
        request_id=f"bench-{i}",
        tools=TOOLS,
        tool_choice="required",
        conversation=[ChatMessage(role="user", content=PROMPT)],
        limits=Limits(max_rounds=2, max_steps=MAX_CALLS, max_tokens=MAX_TOKENS),
    )
    t0 = time.perf_counter()
    stream = await host.open(node["peer_id"], PLAN_PROTOCOL)
    session = PlanSession(Side.PHONE)
    await stream.write(session.send(request))
    text = []
    first: float | None = None
    plan_seen = False
    while not plan_seen:
        for event in session.receive_data(await stream.read_some()):
            if isinstance(event, ActionPlan):
                plan_seen = True
            elif isinstance(event, Token):
                first = first or time.perf_counter() - t0
                text.append(event.text)
            elif getattr(event, "TYPE", "") in ("error", "final"):
                raise RuntimeError(f"unexpected {event}")
    elapsed = time.perf_counter() - t0
    await stream.reset()
    return {"s": elapsed, "ttft_s": first or elapsed, "text": "".join(text)}


def _streamed(client: httpx.Client, body: dict, t0: float) -> dict:
    """One streamed completion: time to the first content chunk, and to the end."""
    first = None
    pieces = []
    with client.stream("POST", "/v1/chat/completions", json=body) as reply:
        for line in reply.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            piece = (json.loads(line[5:])["choices"][0].get("delta") or {}).get("content")
            if piece:
                first = first or time.perf_counter() - t0
                pieces.append(piece)
    return {
        "s": time.perf_counter() - t0,
        "ttft_s": first,
        "text": "".join(pieces),
        "chunks": len(pieces),
    }


async def measure(root: Path, nodes: dict[str, dict], port: int, runs: int) -> dict:
    results: dict[str, list[dict]] = {
        "reference": [],
        "reference-stream": [],
        **{name: [] for name in nodes},
    }
    hosts = {name: phone_host(root / f"phone-{name}") for name in nodes}
    async with hosts["hearth"].run([]), hosts["hearth-upstream"].run([]):
        for name, host in hosts.items():  # connections kept between requests
            await host.connect(nodes[name]["peer_id"], nodes[name]["addrs"])
        for i in range(runs):  # interleaved rounds: the same machine state for all
            results["reference"] += await anyio.to_thread.run_sync(reference_runs, port, 1)
            results["reference-stream"] += await anyio.to_thread.run_sync(
                reference_runs, port, 1, True
            )
            for name, host in hosts.items():
                results[name].append(await one_round(host, nodes[name], i))
                await anyio.sleep(0.05)
    return results


def reference_runs(port: int, runs: int, stream: bool = False) -> list[dict]:
    body = {
        "stream": stream,
        "messages": [{"role": "user", "content": PROMPT}],
        "tools": [t.model_dump() for t in TOOLS],
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "top_k": 40,
        "top_p": 0.95,
        "min_p": 0.05,
        "repeat_penalty": 1.0,
        "seed": 0,
        "grammar": tool_grammar(SCHEMAS, "required", max_calls=MAX_CALLS),
    }
    out = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        for _ in range(runs):
            t0 = time.perf_counter()
            if stream:
                out.append(_streamed(client, body, t0))
                continue
            reply = client.post("/v1/chat/completions", json=body).json()
            out.append(
                {
                    "s": time.perf_counter() - t0,
                    "tokens": reply["usage"]["completion_tokens"],
                    "text": reply["choices"][0]["message"]["content"],
                }
            )
    return out


def main() -> None:
    quiet_libp2p()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "offload.json")
    args = parser.parse_args()
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bf16, _ = make_tiny(root / "models")
        port = 18000 + (int(time.time()) % 1000)
        try:
            procs.append(start_reference(bf16, port))
            node, ready = start_node(root / "node", "--model", str(bf16))
            procs.append(node)
            up, up_ready = start_node(root / "up", "--upstream", f"http://127.0.0.1:{port}")
            procs.append(up)
            pair(root / "node", root / "phone-hearth")
            pair(root / "up", root / "phone-hearth-upstream")
            nodes = {"hearth": ready, "hearth-upstream": up_ready}
            results = trio.run(measure, root, nodes, port, args.runs)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    ref = stats([r["s"] * 1000 for r in results["reference"]])
    tokens = median(r["tokens"] for r in results["reference"])
    reference_text = results["reference"][0]["text"]
    report: dict[str, dict] = {}
    table = Table(title="One plan round: Hearth vs llama-cpp-python server (tiny bf16, loopback)")
    for col in (
        "path",
        "median ms",
        "p90 ms",
        "tokens",
        "tokens/s",
        "same output",
        "ratio",
        "runs",
    ):
        table.add_column(col)
    for name in ("hearth", "hearth-upstream", "reference"):
        rows = results[name]
        st = stats([r["s"] * 1000 for r in rows])
        same = all(r["text"] == reference_text for r in rows)
        tps = tokens / (st["median"] / 1000)
        ratio = st["median"] / ref["median"]
        report[name] = {
            **st,
            "tokens": tokens,
            "tokens_per_s": tps,
            "same_output": same,
            "ratio": ratio,
        }
        table.add_row(
            name,
            f"{st['median']:.1f}",
            f"{st['p90']:.1f}",
            f"{tokens:g}",
            f"{tps:.0f}",
            "yes" if same else "NO",
            f"{ratio:.2f}",
            str(st["runs"]),
        )
    ref_stream = results["reference-stream"]
    for name in ("hearth", "reference-stream"):
        rows = results[name]
        report[name] = {
            **report.get(name, {}),
            "ttft_ms": median(r["ttft_s"] for r in rows) * 1000,
            "streamed_total_ms": median(r["s"] for r in rows) * 1000,
        }
    report["reference-stream"]["same_output"] = all(r["text"] == reference_text for r in ref_stream)
    streaming = Table(title="Streaming: time to first token and the streamed round")
    for col in ("path", "TTFT ms", "streamed round ms", "ratio (round)"):
        streaming.add_column(col)
    base = report["reference-stream"]["streamed_total_ms"]
    for name in ("hearth", "reference-stream"):
        row = report[name]
        streaming.add_row(
            name,
            f"{row['ttft_ms']:.1f}",
            f"{row['streamed_total_ms']:.1f}",
            f"{row['streamed_total_ms'] / base:.2f}",
        )
    Console(width=140).print(table)
    Console(width=140).print(streaming)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
