"""Swarm figures: reaching home through a relay friend, and peer-routed search.

    .venv/bin/python bench/swarm.py [--runs 20]

Real `hearth-node serve` processes on loopback: a home (search relay), friend `a`
(relay, search relay), friend `b` (search exit over an FTS5 index of generated
documents). The phone side runs in this process, as the client.

- connect: a fresh phone host each run, dial + first stream (health) to the home,
  directly and through friend `a` (circuit relay v2); reference: plain py-libp2p
  TCP + Noise + Yamux dial + first stream to a plain host (bench/plain_libp2p.py).
- connect through the relay as the resident companion does (`NodeLink`): one phone
  host keeps its connection to friend `a`; each run the home link is dropped, then
  dialled again through the circuit (HOP/STOP, Noise + Yamux inside) + first stream.
- search: 2-hop (relay, exit) and 3-hop (two relays, exit) searches over a kept
  connection and kept streams (as a resident sender keeps them), a fresh packet
  each; reference: the same query on the same index, directly in process
  (FtsIndex.query).
- CPU per operation of each end: process CPU (psutil) of the home, friend `a`, friend
  `b` and this process (the phone; for the fresh-host rows its host's start and stop
  included), over all runs of a row, divided by the runs: unlike wall time it holds
  on a busy machine.

Prints a table (medians, p90, ratios) and writes bench/results/swarm.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import trio
from rich.console import Console
from rich.table import Table

from hearth.companion.swarmkit import Processes, last_json, pair_in_process, run, start_node
from hearth.protocol.transport.health import ask_health
from hearth.protocol.transport.host import host_for_home, quiet_libp2p
from hearth.protocol.wire.errors import HearthError
from hearth.search.hopstreams import HopStreams
from hearth.search.index import INDEX_FILE, FtsIndex
from hearth.search.onion import Directory
from hearth.search.route import SEARCH_PROTOCOL, choose_path, pull_directory, send

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from connect import client, start, stats  # noqa: E402

WORDS = [
    "relay", "exit", "onion", "home", "phone", "friend",
    "search", "index", "bread", "garden", "river", "kettle",
]  # fmt: skip


def node(*args: str) -> dict:
    return last_json(run("hearth-node", *args, "--json"))


class Cpu:
    """Process CPU of the nodes (psutil) and of this process, the phone (ms)."""

    def __init__(self, nodes: dict[str, dict]) -> None:
        self.procs = {name: psutil.Process(ready["pid"]) for name, ready in nodes.items()}

    def now(self) -> dict[str, float]:
        out = {name: sum(p.cpu_times()[:2]) * 1000 for name, p in self.procs.items()}
        return {**out, "phone": time.process_time() * 1000}

    def per_run(self, before: dict[str, float], runs: int) -> dict[str, float]:
        return {name: (ms - before[name]) / runs for name, ms in self.now().items()}


def set_up(tmp: Path, processes: Processes) -> dict[str, dict]:
    docs = tmp / "docs"
    docs.mkdir()
    for i in range(500):  # a small corpus: 500 notes of 60 words each
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(60)]
        (docs / f"note{i}.md").write_text(f"# note {i}\n" + " ".join(words))
    node("init", "--home", str(tmp / "home"), "--name", "home")
    started = {"home": start_node(processes, tmp / "home")}
    node("roster", "grant", started["home"].peer_id, "search-relay", "--home", str(tmp / "home"))
    for name, grant in (("a", "relay,search-relay"), ("b", "search-exit")):
        uri = node("invite", "--role", "friend", "--grant", grant, "--home", str(tmp / "home"))
        node("join", uri["uri"], "--home", str(tmp / name), "--name", name)
        if name == "b":
            node("index", "add", str(docs), "--home", str(tmp / name))
            (tmp / name / "config.toml").write_text("search_exit_per_minute = 100000\n")
        started[name] = start_node(processes, tmp / name)
    pair_in_process(tmp / "phone", node("invite", "--home", str(tmp / "home"))["uri"])
    return {name: {**n.ready, "pid": n.proc.pid} for name, n in started.items()}


async def measure(tmp: Path, nodes: dict[str, dict], runs: int) -> dict[str, Any]:
    home = nodes["home"]
    cpu, cpu_of = Cpu(nodes), {}
    out: dict[str, list[float]] = {
        "direct": [], "relayed": [], "relay kept": [], "2-hop": [], "3-hop": []
    }  # fmt: skip
    failures: dict[str, int] = {}
    circuits: list[str] = []
    deadline = time.monotonic() + 30
    while not circuits:  # the home's reservation on friend a
        probe = host_for_home(tmp / "phone").host
        async with probe.run([]):
            health = await ask_health(probe, home["peer_id"], home["addrs"])
        circuits = [a for a in health.addrs if "/p2p-circuit/" in a]
        if time.monotonic() > deadline:
            raise RuntimeError("no relay reservation")
        await trio.sleep(0.5)
    for kind, addrs in (("relayed", circuits), ("direct", home["addrs"])):
        before = cpu.now()
        for _ in range(runs):
            host = host_for_home(tmp / "phone").host
            async with host.run([]):
                t0 = time.perf_counter()
                try:
                    await ask_health(host, home["peer_id"], addrs)
                    out[kind].append((time.perf_counter() - t0) * 1000)
                except HearthError as exc:  # counted and shown, never hidden
                    failures[kind] = failures.get(kind, 0) + 1
                    Console(stderr=True).print(f"[red]{kind} connect failed: {exc.message}")
            await trio.sleep(0.2)
        cpu_of[kind] = cpu.per_run(before, runs)
    kept = host_for_home(tmp / "phone").host
    async with kept.run([]):
        await ask_health(kept, home["peer_id"], circuits)  # the relay connection, kept
        before = cpu.now()
        for _ in range(runs):
            await kept.disconnect(home["peer_id"])  # the home link drops
            await trio.sleep(0.2)
            t0 = time.perf_counter()
            try:
                await ask_health(kept, home["peer_id"], circuits)
                out["relay kept"].append((time.perf_counter() - t0) * 1000)
            except HearthError as exc:
                failures["relay kept"] = failures.get("relay kept", 0) + 1
                Console(stderr=True).print(f"[red]relay kept connect failed: {exc.message}")
        cpu_of["relay kept"] = cpu.per_run(before, runs)
    phone = host_for_home(tmp / "phone")
    async with phone.host.run([]):
        directory = Directory()
        while len(directory.usable(phone.roster.roster, time.time())) < 3:
            await pull_directory(
                phone.host, home["peer_id"], directory, phone.roster.roster, home["addrs"]
            )
            await trio.sleep(0.5)
        nodes_now = directory.usable(phone.roster.roster, time.time())
        streams = HopStreams(phone.host, SEARCH_PROTOCOL)
        for hops in (2, 3):
            path = choose_path(
                nodes_now,
                phone.roster.roster,
                phone.host.peer_id,
                home["peer_id"],
                hops,
                time.time(),
            )
            await send(phone.host, path, "relay garden", 10, streams)  # connections, streams up
            before = cpu.now()
            for _ in range(runs):
                t0 = time.perf_counter()
                results, _ = await send(phone.host, path, "relay garden", 10, streams)
                out[f"{hops}-hop"].append((time.perf_counter() - t0) * 1000)
                assert results, "the exit's index answered nothing"
            cpu_of[f"{hops}-hop"] = cpu.per_run(before, runs)
    return {**out, "failures": failures, "cpu": cpu_of}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "swarm.json")
    args = parser.parse_args()
    quiet_libp2p()
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp_name, Processes() as processes:
        tmp = Path(tmp_name)
        try:
            nodes = set_up(tmp, processes)
            samples = trio.run(measure, tmp, nodes, args.runs)
            plain, ready = start(
                [sys.executable, str(HERE / "plain_libp2p.py"), "serve", f"{tmp}/p.json"],
                tmp / "p.json",
            )
            procs.append(plain)
            reference = [
                client(
                    [sys.executable, str(HERE / "plain_libp2p.py"), "ping", ready["addrs"][0], "1"]
                )["connect_ms"]
                for _ in range(args.runs)
            ]
            index = FtsIndex(tmp / "b" / INDEX_FILE)
            direct_search = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                assert index.query("relay garden", 10)
                direct_search.append((time.perf_counter() - t0) * 1000)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    ref_connect, ref_search = stats(reference), stats(direct_search)
    report = {
        "connect direct": {"hearth": stats(samples["direct"]), "reference": ref_connect},
        "connect through a relay friend": {
            "hearth": stats(samples["relayed"]),
            "reference": ref_connect,
        },
        "connect through a relay friend, relay connection kept": {
            "hearth": stats(samples["relay kept"]),
            "reference": ref_connect,
        },
        "search 2 hops": {"hearth": stats(samples["2-hop"]), "reference": ref_search},
        "search 3 hops": {"hearth": stats(samples["3-hop"]), "reference": ref_search},
    }
    for kind, name in (
        ("direct", "connect direct"),
        ("relayed", "connect through a relay friend"),
        ("relay kept", "connect through a relay friend, relay connection kept"),
    ):
        report[name]["failed"] = samples["failures"].get(kind, 0)
    for kind, name in (
        ("direct", "connect direct"),
        ("relayed", "connect through a relay friend"),
        ("relay kept", "connect through a relay friend, relay connection kept"),
        ("2-hop", "search 2 hops"),
        ("3-hop", "search 3 hops"),
    ):
        report[name]["cpu_ms"] = samples["cpu"][kind]
    for row in report.values():
        row["ratio"] = row["hearth"]["median"] / row["reference"]["median"]
    table = Table(title="Swarm: relayed connect and peer-routed search (loopback, ms)")
    for col in (
        "figure",
        "Hearth median",
        "Hearth p90",
        "reference median",
        "ratio",
        "runs",
        "failed",
        "reference is",
    ):
        table.add_column(col)
    what = {
        "connect direct": "plain py-libp2p dial + first stream (fresh process)",
        "connect through a relay friend": "plain py-libp2p dial + first stream (fresh process)",
        "connect through a relay friend, relay connection kept": "plain py-libp2p dial + "
        "first stream (fresh process)",
        "search 2 hops": "the same query on the same FTS5 index, in process",
        "search 3 hops": "the same query on the same FTS5 index, in process",
    }
    for name, row in report.items():
        table.add_row(
            name, f"{row['hearth']['median']:.2f}", f"{row['hearth']['p90']:.2f}",
            f"{row['reference']['median']:.2f}", f"{row['ratio']:.1f}", str(row["hearth"]["runs"]),
            str(row.get("failed", 0)), what[name],
        )  # fmt: skip
    Console(width=160).print(table)
    ends = ("home", "a", "b", "phone")
    cpu_table = Table(title="CPU per operation of each end (ms; home, relay friend a, exit b)")
    for col in ("figure", *ends):
        cpu_table.add_column(col)
    for name, row in report.items():
        cpu_table.add_row(name, *(f"{row['cpu_ms'][end]:.2f}" for end in ends))
    Console(width=160).print(cpu_table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
