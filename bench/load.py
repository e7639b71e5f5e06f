"""Load: bursts of 1, 4, 16 and 64 phones at once, each with one plan request, against
the same bursts of concurrent requests to the reference server.

    .venv/bin/python bench/load.py [--phones 1,4,16,64] [--bursts 3]

Hearth: every phone is its own paired identity with its own connection; a request is a
one-round plan session (request → signed plan). The node runs with its defaults
(2 sessions generating, 8 queued, 2 per phone): past that a phone gets `busy` with a
retry hint, and waits that long and asks again, as a phone does, until its session
completes. A burst ends when every phone's session has; `--bursts` follow one another.
Reference: the same GGUF behind llama.cpp's own server (llama-server, via xllamacpp,
its default slots), the same bursts of concurrent chat completions (it queues
everything). Reports sessions/s over all bursts (every session completed on both
sides), p99 latency (a phone's, from its first ask to its plan, retries included),
`busy` answers retried and any other error, and the node's p99 wait in its queue.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import trio
from rich.console import Console
from rich.table import Table

from hearth.companion.swarmkit import Processes, pair_in_process, start_node
from hearth.node.control import InviteReply, InviteRequest, StatusRequest, request
from hearth.node.status import AdmissionSummary, NodeStatus
from hearth.protocol.model.tiny import make_tiny
from hearth.protocol.transport.host import quiet_libp2p
from hearth.protocol.wire.errors import ErrorCode, HearthError

HERE = Path(__file__).parent
MAX_TRIES = 100  # a phone told `busy` this often in one burst gives up (counted)
sys.path.insert(0, str(HERE))
from offload import (  # noqa: E402
    Unexpected,
    one_round,
    phone_host,
    reference_body,
    start_reference,
)


def summary(latencies: list[float], errors: dict[str, int], wall: float) -> dict:
    """What one load run did: sessions completed, per second, p99 latency, errors."""
    return {
        "completed": len(latencies),
        "per_s": len(latencies) / wall,
        "p99_ms": p99(latencies) * 1000,
        "errors": errors,
    }


def p99(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * 0.99))] if values else 0.0


def pair_phones(node_home: Path, root: Path, count: int) -> list[Path]:
    homes = [root / f"phone{i}" for i in range(count)]
    for i, home in enumerate(homes):  # invites through the control socket: no CLI start-ups
        invite = InviteRequest(op="invite", role="phone", ttl=600)
        uri = request(node_home, invite, InviteReply).uri
        pair_in_process(home, uri, f"p{i}")
    return homes


def admission(node_home: Path) -> AdmissionSummary:
    """The running node's admission counters."""
    status = request(node_home, StatusRequest(op="status"), NodeStatus)
    assert status.admission is not None  # a running node's status carries them
    return status.admission


async def hearth_load(homes: list[Path], node: dict, bursts: int) -> dict:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    hosts = [phone_host(h) for h in homes]
    async with contextlib.AsyncExitStack() as stack:
        for host in hosts:
            await stack.enter_async_context(host.run([]))
            await host.connect(node["peer_id"], node["addrs"])
        started = time.perf_counter()

        async def one(i: int, host) -> None:  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            for _ in range(MAX_TRIES):
                try:
                    await one_round(host, node, i)
                    latencies.append(time.perf_counter() - t0)
                    return
                except HearthError as exc:
                    errors[exc.code.value] = errors.get(exc.code.value, 0) + 1
                    return
                except Unexpected as exc:  # an error frame in the session
                    code = getattr(exc.event, "code", None)
                    if code is not ErrorCode.BUSY:
                        errors["other"] = errors.get("other", 0) + 1
                        return
                    errors["busy"] = errors.get("busy", 0) + 1  # retried, as a phone does
                    await trio.sleep(getattr(exc.event, "retry_after", None) or 0.5)
            errors["gave up"] = errors.get("gave up", 0) + 1

        for burst in range(bursts):
            async with anyio.create_task_group() as tg:
                for i, host in enumerate(hosts):
                    tg.start_soon(one, burst * len(hosts) + i, host)
        wall = time.perf_counter() - started
    return summary(latencies, errors, wall)


async def reference_load(port: int, count: int, bursts: int) -> dict:
    body = reference_body("llama-server", stream=False)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=600, limits=httpx.Limits(max_connections=count)
    ) as client:
        started = time.perf_counter()

        async def one() -> None:
            t0 = time.perf_counter()
            try:
                reply = await client.post("/v1/chat/completions", json=body)
                reply.raise_for_status()
                latencies.append(time.perf_counter() - t0)
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1

        for _ in range(bursts):
            async with anyio.create_task_group() as tg:
                for _ in range(count):
                    tg.start_soon(one)
        wall = time.perf_counter() - started
    return summary(latencies, errors, wall)


def main() -> None:
    quiet_libp2p()
    parser = argparse.ArgumentParser()
    parser.add_argument("--phones", default="1,4,16,64")
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "load.json")
    args = parser.parse_args()
    counts = [int(n) for n in args.phones.split(",")]
    report: dict[str, dict] = {}
    procs = []
    with tempfile.TemporaryDirectory() as tmp, Processes() as processes:
        root = Path(tmp)
        bf16, _ = make_tiny(root / "models")
        try:
            reference, port = start_reference("llama-server", bf16)
            procs.append(reference)
            ready = start_node(processes, root / "node", "--model", str(bf16)).ready
            homes = pair_phones(root / "node", root, max(counts))
            for n in counts:
                before = admission(root / "node")
                ours = trio.run(hearth_load, homes[:n], ready, args.bursts)
                after = admission(root / "node")
                ours["queue_wait_p99_ms"] = after.queue_wait_p99_ms
                ours["busy_at_node"] = after.busy - before.busy
                theirs = trio.run(reference_load, port, n, args.bursts)
                report[str(n)] = {"hearth": ours, "reference": theirs}
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    table = Table(title=f"Load: {args.bursts} bursts of N phones at once, one plan round each")
    for col in (
        "phones",
        "Hearth sessions/s",
        "ref req/s",
        "ratio",
        "Hearth p99 ms",
        "ref p99 ms",
        "p99 queue wait ms",
        "busy (retried)",
        "other errors",
    ):
        table.add_column(col)
    for n, row in report.items():
        ours, theirs = row["hearth"], row["reference"]
        other = sum(v for k, v in ours["errors"].items() if k != "busy")
        table.add_row(
            n,
            f"{ours['per_s']:.2f}",
            f"{theirs['per_s']:.2f}",
            f"{ours['per_s'] / theirs['per_s']:.2f}",
            f"{ours['p99_ms']:.0f}",
            f"{theirs['p99_ms']:.0f}",
            f"{ours['queue_wait_p99_ms']:.0f}",
            str(ours["errors"].get("busy", 0)),
            str(other),
        )
    Console(width=150).print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
