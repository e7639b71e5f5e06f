"""The whole suite, three times in a row, with two CPU-burning processes beside it
(not run by CI; for checking that no test leans on an idle machine).

    .venv/bin/python tests/under_load.py [--runs 3] [--burners 2] [--shard K/N] [-- PYTEST ARGS...]

`--shard K/N` runs the K-th of N pieces of the suite (its test files, sorted by size and
dealt out in turn, so the pieces take about as long), e.g. `--runs 1 --shard 1/4`: one
piece that fits beside the burners on a 2-core machine.

The burners are `stress-ng --cpu N` (Debian: `apt-get install -y stress-ng`), or N
Python busy loops where stress-ng is missing. Each run's pytest summary line and
exit status are printed; the script exits non-zero if any run failed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BURN = "while True: pass"


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    if count <= 0:  # (stress-ng reads `--cpu 0` as "every core")
        return []
    if shutil.which("stress-ng"):
        cmd = ["stress-ng", "--cpu", str(count), "--quiet"]
        return [subprocess.Popen(cmd, start_new_session=True)]
    return [
        subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True) for _ in range(count)
    ]


def stop(burners: list[subprocess.Popen[bytes]]) -> None:
    for proc in burners:  # each burner leads its own process group (stress-ng forks workers)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def shard_files(spec: str) -> list[str]:
    """The test files of shard `K/N`: every file sorted by size, the K-th of each N."""
    k, _, n = spec.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise SystemExit(f"--shard {spec}: expected K/N with 1 <= K <= N")
    files = sorted(
        (p for p in (ROOT / "tests").rglob("test_*.py") if "node_modules" not in p.parts),
        key=lambda p: (-p.stat().st_size, p.name),
    )
    return [str(p.relative_to(ROOT)) for p in files[int(k) - 1 :: int(n)]]


def summary(output: str) -> str:
    lines = [
        line
        for line in output.splitlines()
        if re.search(r"\d+ (passed|failed|errors?)\b.* in [\d.]+s", line)
    ]
    return lines[-1].strip("= ") if lines else "(no pytest summary line)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--shard", help="K/N: the K-th of N pieces of the suite")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    if args.shard:
        args.pytest_args = [*shard_files(args.shard), *args.pytest_args]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the burners are stopped on the way
    burners = start_burners(args.burners)
    kind = "stress-ng" if shutil.which("stress-ng") else "python busy loops"
    failed = 0
    try:  # (even a print can fail: a closed pipe)
        print(f"{args.burners} CPU burners running ({kind})", flush=True)
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            result = subprocess.run(
                [str(Path(sys.executable).parent / "pytest"), "-q", *args.pytest_args],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            took = time.monotonic() - started
            print(
                f"run {run}/{args.runs}: exit {result.returncode} after {took:.0f} s: "
                f"{summary(result.stdout)}",
                flush=True,
            )
            if result.returncode != 0:
                failed += 1
                failures = [ln for ln in result.stdout.splitlines() if ln.startswith("FAILED")]
                print("\n".join(failures), flush=True)
    finally:
        stop(burners)
    print(f"{args.runs - failed} of {args.runs} runs passed under load", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
