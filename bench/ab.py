"""Two trees side by side in one run, alternating: issue 34's first-token and CPU rows for
a change, before and after, on a busy machine (ratios; the load average is printed).

    git -C . archive BASE | tar -x -C /tmp/base
    mkdir -p /tmp/basepkg/hearth
    for p in protocol companion node search; do ln -s /tmp/base/$p /tmp/basepkg/hearth/$p; done
    .venv/bin/python bench/ab.py local --base /tmp/basepkg   # or: remote

`local`: two `hearth serve` (tiny Q4, under `decode_timed.py`), the base tree's started
with `PYTHONPATH=--base`; blocks of `--per` streamed `hearth-local` answers to each in turn:
API request → first token, the whole answer, and the companion's CPU per request beyond
`llama_decode` (as `companion.py`). `remote`: two `hearth-node serve` (tiny bf16), one
streamed plan round each in turn over a kept connection (as `offload.py`'s streaming row).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import trio

from hearth.companion.swarmkit import (
    Processes,
    init_phone,
    pair_in_process,
    start_companion,
    start_node,
)
from hearth.protocol.model.tiny import make_tiny

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
# isort: off
from companion import beyond_decode_s, streamed  # noqa: E402  (before offload: it puts the repo first)
from offload import one_round, phone_host, quiet_libp2p  # noqa: E402
# isort: on

SIDES = ("before", "after")


def tree(path: str) -> None:
    """Processes started next run `path`'s tree (empty: this one)."""
    if path:
        os.environ["PYTHONPATH"] = path
    else:
        os.environ.pop("PYTHONPATH", None)


def local(root: Path, q4: Path, trees: dict[str, str], blocks: int, per: int) -> dict[str, Any]:
    first: dict[str, list[float]] = {n: [] for n in SIDES}
    whole: dict[str, list[float]] = {n: [] for n in SIDES}
    cpu: dict[str, list[float]] = {n: [] for n in SIDES}
    with Processes() as processes:
        sides = {}
        for name in SIDES:
            home, decode = root / name, root / f"{name}.decode"
            init_phone(home, q4)
            tree(trees[name])
            timed = (sys.executable, str(HERE / "decode_timed.py"), str(decode))
            companion = start_companion(processes, home, prefix=timed)
            tree("")
            token = (home / "api.token").read_text().strip()
            client = httpx.Client(timeout=120, headers={"Authorization": f"Bearer {token}"})
            sides[name] = (companion, str(companion.ready["api"]), client, decode)
        for _, api, client, _ in sides.values():
            for _ in range(3):  # the model loaded, the prefix cached
                streamed(client, api, "hearth-local")
        for block in range(blocks):
            for name in SIDES if block % 2 == 0 else SIDES[::-1]:
                companion, api, client, decode = sides[name]
                before = beyond_decode_s({companion.proc: decode})
                for _ in range(per):
                    ttft, total = streamed(client, api, "hearth-local")
                    first[name].append(ttft)
                    whole[name].append(total)
                spent = beyond_decode_s({companion.proc: decode}) - before
                cpu[name].append(spent / per * 1000)
        for _, _, client, _ in sides.values():
            client.close()
    figures = {"first token (ms)": first, "whole answer (ms)": whole, "CPU beyond decode (ms)": cpu}
    return {name: {n: statistics.median(v[n]) for n in SIDES} for name, v in figures.items()}


async def rounds(root: Path, nodes: dict[str, dict[str, Any]], runs: int) -> dict[str, list]:
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in SIDES}
    hosts = {n: phone_host(root / f"phone-{n}") for n in SIDES}
    async with hosts["before"].run([]), hosts["after"].run([]):
        for name, host in hosts.items():
            await host.connect(nodes[name]["peer_id"], nodes[name]["addrs"])
            for i in range(3):
                await one_round(host, nodes[name], i)
        for i in range(runs):
            for name in SIDES if i % 2 == 0 else SIDES[::-1]:
                results[name].append(await one_round(hosts[name], nodes[name], 100 + i))
                await trio.sleep(0.05)
    return results


def remote(root: Path, bf16: Path, trees: dict[str, str], runs: int) -> dict[str, Any]:
    quiet_libp2p()
    with Processes() as processes:
        nodes = {}
        for name in SIDES:
            tree(trees[name])
            node = start_node(processes, root / name, "--model", str(bf16))
            tree("")
            pair_in_process(root / f"phone-{name}", node.invite(), "bench")
            nodes[name] = node.ready
        results = trio.run(rounds, root, nodes, runs)
    return {
        "first token (ms)": {
            n: statistics.median(r["ttft_s"] for r in results[n]) * 1000 for n in SIDES
        },
        "plan round (ms)": {n: statistics.median(r["s"] for r in results[n]) * 1000 for n in SIDES},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("local", "remote"))
    parser.add_argument("--base", required=True, help="PYTHONPATH of the tree before")
    parser.add_argument("--after", default="", help="PYTHONPATH of the tree after (this one)")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--per", type=int, default=10)
    args = parser.parse_args()
    trees = {"before": args.base, "after": args.after}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bf16, q4 = make_tiny(root / "models")
        if args.what == "local":
            report = local(root, q4, trees, args.blocks, args.per)
        else:
            report = remote(root, bf16, trees, args.blocks * args.per)
    load.append(os.getloadavg()[0])
    for figures in report.values():
        figures["ratio"] = figures["after"] / figures["before"]
    print(json.dumps({"load_1min": load, **report}, indent=1))


if __name__ == "__main__":
    main()
