"""Offload overhead: a one-round Hearth plan session against the same request to the
same tiny GGUF behind llama.cpp's own server (`llama-server`, embedded by the
`xllamacpp` wheel) and behind llama-cpp-python's OpenAI-compatible server.

    .venv/bin/python bench/offload.py [--runs 20]

Same prompt, tool schemas, grammar, greedy sampling and token limit on every side;
all keep their connection between requests. Hearth: request → signed ActionPlan
over libp2p (pnet + Noise + Yamux), with the node's llama-cpp backend and with its
upstream backend pointed at llama-server. References: one non-streaming chat
completion through httpx, and the same streamed. Per-token generation time: the
node's token loop (`LlamaRuntime.generate`, in this process, the shared prefix
cached as on the node) against llama-server's own `timings.predicted_per_token_ms`
for the same request. Rounds interleave; prints medians, p90 and ratios; writes JSON.
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
from typing import NamedTuple

import anyio
import httpx
import trio
from rich.console import Console
from rich.table import Table

from hearth.companion.swarmkit import Processes, pair_in_process, start_node
from hearth.node.backends import Conversation
from hearth.node.backends.llamacpp import LlamaCppBackend
from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.runtime import Sampling, SessionMemory
from hearth.protocol.model.tiny import make_tiny
from hearth.protocol.transport.host import HearthHost, host_for_home, quiet_libp2p
from hearth.protocol.transport.plans import PLAN_PROTOCOL
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
sys.path.insert(0, str(HERE.parent))
from tests.upstream_servers import ROOT, command, free_port, wait_serving  # noqa: E402

REFERENCES = ("llama-server", "llama-cpp-python")
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


class Server(NamedTuple):
    port: int
    pid: int


def start_reference(kind: str, model: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        command(kind, model, port),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_serving(proc, port, timeout=120)
    return proc, port


def phone_host(phone_home: Path) -> HearthHost:
    return host_for_home(phone_home).host


class Unexpected(RuntimeError):
    """A frame in place of the plan (an error frame: `busy` with its `retry_after`, ...)."""

    def __init__(self, event: object) -> None:
        super().__init__(f"unexpected {event}")
        self.event = event


def plan_request(request_id: str) -> PlanRequest:
    """The streamed plan round's request (the same for every round)."""
    return PlanRequest(
        request_id=request_id,
        tools=TOOLS,
        tool_choice="required",
        conversation=[ChatMessage(role="user", content=PROMPT)],
        limits=Limits(max_rounds=2, max_steps=MAX_CALLS, max_tokens=MAX_TOKENS),
    )


async def one_round(host: HearthHost, node: dict, i: int) -> dict:
    """request → signed ActionPlan on a new stream of the kept connection."""
    request = plan_request(f"bench-{i}")
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
                raise Unexpected(event)
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


async def measure(
    root: Path, nodes: dict[str, dict], servers: dict[str, Server], loop: TokenLoop, runs: int
) -> dict:
    results: dict[str, list[dict]] = {name: [] for name in (*nodes, "hearth-loop")}
    for kind in servers:
        results[kind] = []
        results[f"{kind}-stream"] = []
    hosts = {name: phone_host(root / f"phone-{name}") for name in nodes}
    async with hosts["hearth"].run([]), hosts["hearth-upstream"].run([]):
        for name, host in hosts.items():  # connections kept between requests
            await host.connect(nodes[name]["peer_id"], nodes[name]["addrs"])
        for i in range(runs):  # interleaved rounds: the same machine state for all
            for kind, server in servers.items():
                for stream in (False, True):
                    results[f"{kind}-stream" if stream else kind].append(
                        await anyio.to_thread.run_sync(reference_round, kind, server, stream)
                    )
            for name, host in hosts.items():
                results[name].append(await one_round(host, nodes[name], i))
                await anyio.sleep(0.05)
            results["hearth-loop"].append(await anyio.to_thread.run_sync(loop.once))
    return results


class TokenLoop:
    """The node's llama-cpp token loop in this process, on the node's own prompt (the
    shared tools prefix cached after the first call, as on the node). Each generated
    token's decode is counted apart, wall and thread CPU, so the loop's own share
    (sampling, grammar, UTF-8 checks, Python) shows."""

    def __init__(self, model: Path) -> None:
        self.backend = LlamaCppBackend(model, 4096)
        conv = Conversation(
            messages=[ChatMessage(role="user", content=PROMPT)],
            tools=list(TOOLS),
        )
        self.prefix, self.text = self.backend._text_for(conv)
        self.grammar = tool_grammar(SCHEMAS, "required", max_calls=MAX_CALLS)
        runtime = self.backend.runtime
        self.decode_s = self.decode_cpu_s = 0.0
        append = runtime._append

        def timed_append(token: int) -> None:  # measuring only: the same call, timed
            start, cpu = time.perf_counter(), time.thread_time()
            append(token)
            self.decode_s += time.perf_counter() - start
            self.decode_cpu_s += time.thread_time() - cpu

        runtime._append = timed_append  # type: ignore[method-assign]

    def once(self) -> dict:
        stamps: list[float] = []
        self.decode_s = self.decode_cpu_s = 0.0
        cpu0 = time.thread_time()
        result = self.backend.runtime.generate(
            SessionMemory(),
            self.text,
            prefix=self.prefix,
            grammar=self.grammar,
            max_tokens=MAX_TOKENS,
            sampling=Sampling(),
            on_text=lambda _piece: stamps.append(time.perf_counter()),
        )
        cpu = time.thread_time() - cpu0  # generate runs in this thread
        steps = len(stamps) - 1  # one decode between consecutive pieces
        per_token = (stamps[-1] - stamps[0]) / steps if steps > 0 else 0.0
        decode = self.decode_s / max(1, result.tokens)  # one decode per token produced
        return {
            "per_token_ms": per_token * 1000,
            "decode_ms": decode * 1000,
            "loop_ms": (per_token - decode) * 1000,
            "cpu_per_token_ms": cpu / max(1, result.tokens) * 1000,
            "decode_cpu_ms": self.decode_cpu_s / max(1, result.tokens) * 1000,
            "tokens": result.tokens,
            "text": result.text,
        }


def reference_body(kind: str, stream: bool) -> dict:
    """The request both servers get; llama-server takes a grammar only without tool
    calling (as the node's upstream backend learns), so it renders the tools and
    leaves them to the grammar."""
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
    if kind == "llama-server":
        body["tool_choice"] = "none"
    return body


def cpu_s(pid: int) -> float:
    """CPU time so far of every thread of process `pid` (ns-exact, from schedstat)."""
    return (
        sum(
            int((task / "schedstat").read_text().split()[0])
            for task in Path(f"/proc/{pid}/task").iterdir()
        )
        / 1e9
    )


def reference_round(kind: str, server: Server, stream: bool = False) -> dict:
    body = reference_body(kind, stream)
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=120) as client:
        client.get("/v1/models")  # the connection is open before the clock starts
        t0, cpu0 = time.perf_counter(), cpu_s(server.pid)
        if stream:
            return _streamed(client, body, t0)
        reply = client.post("/v1/chat/completions", json=body).json()
        elapsed, cpu = time.perf_counter() - t0, cpu_s(server.pid) - cpu0
    timings = reply.get("timings") or {}  # llama-server's own
    tokens = reply["usage"]["completion_tokens"]
    return {
        "s": elapsed,
        "tokens": tokens,
        "text": reply["choices"][0]["message"]["content"],
        "per_token_ms": timings.get("predicted_per_token_ms"),
        "cpu_per_token_ms": cpu / tokens * 1000,
    }


def main() -> None:
    quiet_libp2p()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "offload.json")
    args = parser.parse_args()
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp, Processes() as processes:
        root = Path(tmp)
        bf16, _ = make_tiny(root / "models")
        try:
            servers: dict[str, Server] = {}
            for kind in REFERENCES:
                proc, port = start_reference(kind, bf16)
                procs.append(proc)
                servers[kind] = Server(port, proc.pid)
            node = start_node(processes, root / "node", "--model", str(bf16))
            upstream = f"http://127.0.0.1:{servers['llama-server'].port}"
            up = start_node(processes, root / "up", "--upstream", upstream)
            pair_in_process(root / "phone-hearth", node.invite(), "bench")
            pair_in_process(root / "phone-hearth-upstream", up.invite(), "bench")
            nodes = {"hearth": node.ready, "hearth-upstream": up.ready}
            loop = TokenLoop(bf16)
            results = trio.run(measure, root, nodes, servers, loop, args.runs)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    report = summarise(results)
    show(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


def summarise(results: dict[str, list[dict]]) -> dict[str, dict]:
    """Medians per path; ratios against llama-server; outputs compared with its own."""
    ref = stats([r["s"] * 1000 for r in results["llama-server"]])
    tokens = median(r["tokens"] for r in results["llama-server"])
    reference_text = results["llama-server"][0]["text"]
    report: dict[str, dict] = {}
    for name in ("hearth", "hearth-upstream", *REFERENCES):
        rows = results[name]
        st = stats([r["s"] * 1000 for r in rows])
        report[name] = {
            **st,
            "tokens": tokens,
            "tokens_per_s": tokens / (st["median"] / 1000),
            "same_output": all(r["text"] == reference_text for r in rows),
            "ratio": st["median"] / ref["median"],
        }
    for name in ("hearth", *(f"{kind}-stream" for kind in REFERENCES)):
        rows = results[name]
        report.setdefault(name, {}).update(
            ttft_ms=median(r["ttft_s"] for r in rows) * 1000,
            streamed_total_ms=median(r["s"] for r in rows) * 1000,
            same_output=all(r["text"] == reference_text for r in rows),
        )
    report["per-token"] = {
        "hearth": stats([r["per_token_ms"] for r in results["hearth-loop"]]),
        "hearth-decode": stats([r["decode_ms"] for r in results["hearth-loop"]]),
        "hearth-loop": stats([r["loop_ms"] for r in results["hearth-loop"]]),
        "hearth-cpu": stats([r["cpu_per_token_ms"] for r in results["hearth-loop"]]),
        "hearth-decode-cpu": stats([r["decode_cpu_ms"] for r in results["hearth-loop"]]),
        "llama-server-cpu": stats([r["cpu_per_token_ms"] for r in results["llama-server"]]),
        "llama-server": stats([r["per_token_ms"] for r in results["llama-server"]]),
        "hearth_tokens": median(r["tokens"] for r in results["hearth-loop"]),
        "same_output": all(r["text"] == reference_text for r in results["hearth-loop"]),
    }
    return report


def show(report: dict[str, dict]) -> None:
    table = Table(title="One plan round: Hearth vs llama-server (tiny bf16, loopback)")
    for col in ("path", "median ms", "p90 ms", "tokens", "tokens/s", "same output", "ratio"):
        table.add_column(col)
    for name in ("hearth", "hearth-upstream", *REFERENCES):
        row = report[name]
        table.add_row(
            name,
            f"{row['median']:.1f}",
            f"{row['p90']:.1f}",
            f"{row['tokens']:g}",
            f"{row['tokens_per_s']:.0f}",
            "yes" if row["same_output"] else "NO",
            f"{row['ratio']:.2f}",
        )
    streaming = Table(title="Streaming: time to first token and the streamed round")
    for col in ("path", "TTFT ms", "streamed round ms", "ratio (round)"):
        streaming.add_column(col)
    base = report["llama-server-stream"]["streamed_total_ms"]
    for name in ("hearth", *(f"{kind}-stream" for kind in REFERENCES)):
        row = report[name]
        streaming.add_row(
            name,
            f"{row['ttft_ms']:.1f}",
            f"{row['streamed_total_ms']:.1f}",
            f"{row['streamed_total_ms'] / base:.2f}",
        )
    per_token = report["per-token"]
    console = Console(width=140)
    console.print(table)
    console.print(streaming)
    console.print(
        f"per-token generation: node's token loop {per_token['hearth']['median']:.3f} ms, "
        f"llama-server {per_token['llama-server']['median']:.3f} ms "
        f"({per_token['hearth']['median'] / per_token['llama-server']['median']:.2f}x); "
        f"of the loop's, llama_decode {per_token['hearth-decode']['median']:.3f} ms and "
        f"the loop's own work {per_token['hearth-loop']['median']:.3f} ms; CPU per token "
        f"{per_token['hearth-cpu']['median']:.3f} ms against llama-server's "
        f"{per_token['llama-server-cpu']['median']:.3f} ms (whole request / tokens), "
        f"of which a token's decode {per_token['hearth-decode-cpu']['median']:.3f} ms"
    )


if __name__ == "__main__":
    main()
