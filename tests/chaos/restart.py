"""Restart to serving (issue 33): `python -m tests.chaos.restart [--runs N]`.

Starts `hearth serve` N times on a copy of the fixture phone home (`tests/data/home-v0`,
paired, its home node away, migrated once before), and measures from the process's
start to the first `status` answered over companion.sock: the wall time, and the CPU
time the companion used meanwhile (the machine may be busy: CPU time is what the
companion itself spends). Each kind twice: an idle home, and a home whose journal holds
a plan killed mid-run (resumed before serving). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import trio

from hearth.companion.client import companion
from hearth.companion.commands import StatusOp
from hearth.companion.swarmkit import BIN, run
from hearth.protocol.wire.errors import HearthError

from ..test_formats import FIXTURE


async def answered(home: Path) -> bool:
    """Whether a companion answered `status` over companion.sock just now."""
    try:
        async with companion(home) as connection:
            return connection is not None and "peer_id" in await connection.call(StatusOp())
    except (HearthError, OSError):  # starting: not yet greeting, or closing
        return False


def once(home: Path, serve_log: Path) -> tuple[float, float]:
    """`hearth serve` started and stopped: (wall s, CPU s) to the first status answer."""
    with serve_log.open("a") as log:
        proc = subprocess.Popen(
            [str(BIN / "hearth"), "serve", "--home", str(home), "--api-port", "0"],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    t0 = time.monotonic()
    try:
        watched = psutil.Process(proc.pid)
        while not trio.run(answered, home):
            if proc.poll() is not None:
                raise RuntimeError(f"hearth serve exited {proc.returncode}")
            time.sleep(0.005)
        wall = time.monotonic() - t0
        cpu = watched.cpu_times()
        return wall, cpu.user + cpu.system
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def fixture_home(root: Path) -> Path:
    """The fixture phone home, private, migrated once (its journal still mid-plan)."""
    home = root / "phone"
    shutil.copytree(FIXTURE / "phone", home)
    for path in [home, *home.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    run("hearth", "inbox", "--json", "--home", str(home))
    return home


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": round(ordered[len(ordered) // 2], 3), "max": round(ordered[-1], 3)}


def measure(runs: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hearth-restart-") as tmp:
        base = fixture_home(Path(tmp))
        for kind in ("journal to resume", "idle"):
            walls, cpus = [], []
            for n in range(runs):
                home = Path(tmp) / f"{kind[0]}{n}"
                shutil.copytree(base, home, symlinks=True)
                if kind == "idle":  # resumed once already: nothing left to resume
                    once(home, Path(tmp) / "serve.log")
                wall, cpu = once(home, Path(tmp) / "serve.log")
                walls.append(wall)
                cpus.append(cpu)
                shutil.rmtree(home)
            results[kind] = {"runs": runs, "wall_s": spread(walls), "cpu_s": spread(cpus)}
    results["load_1min"] = os.getloadavg()[0]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    print(json.dumps(measure(parser.parse_args().runs)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
