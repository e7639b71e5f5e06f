"""The node's CPU per plan session under `load.py`'s bursts, by thread, and the phones'.

    .venv/bin/python bench/load_cpu.py [--phones 64] [--bursts 3]

A warm-up burst of 16 first (model pages, the grammar, the tools block cached), then
`--bursts` bursts of `--phones` phones that retry after `retry_after`, as in `load.py`.
Thread CPU (psutil) holds better than wall time on a busy machine: the generation
worker threads against the event loop thread (streams, requests, `busy` answers).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psutil
import trio

from hearth.companion.swarmkit import Processes, start_node
from hearth.protocol.model.tiny import make_tiny
from hearth.protocol.transport.host import quiet_libp2p

sys.path.insert(0, str(Path(__file__).parent))
from load import admission, hearth_load, pair_phones


def main() -> None:
    quiet_libp2p()
    parser = argparse.ArgumentParser()
    parser.add_argument("--phones", type=int, default=64)
    parser.add_argument("--bursts", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Processes() as processes:
        root = Path(tmp)
        bf16, _ = make_tiny(root / "models")
        node = start_node(processes, root / "node", "--model", str(bf16))
        homes = pair_phones(root / "node", root, args.phones)
        proc = psutil.Process(node.proc.pid)
        trio.run(hearth_load, homes[:16], node.ready, 1)

        def threads() -> dict[int, float]:
            return {t.id: t.user_time + t.system_time for t in proc.threads()}

        before, mine, busy = threads(), time.process_time(), admission(root / "node").busy
        started = time.perf_counter()
        out = trio.run(hearth_load, homes, node.ready, args.bursts)
        wall = time.perf_counter() - started
        after, n = threads(), out["completed"]
        per = sorted(((after[k] - before.get(k, 0)) * 1000 / n for k in after), reverse=True)
        busy = admission(root / "node").busy - busy
        print(f"{n} sessions in {wall:.1f} s ({out['per_s']:.2f}/s), {busy} busy, {out['errors']}")
        print(
            f"node CPU per session: {sum(per):.1f} ms; busiest threads",
            [round(x, 1) for x in per[:3]],
        )
        print(f"phones' process CPU per session: {(time.process_time() - mine) * 1000 / n:.1f} ms")


if __name__ == "__main__":
    main()
