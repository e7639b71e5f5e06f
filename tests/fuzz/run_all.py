"""Run every fuzz target for its share of the CI budget, one after another, and print
each one's executions and the total. Exits non-zero if a target crashed, or the
total fell short of `--min-total`.

    python tests/fuzz/run_all.py [--scale 1.0] [--min-total 1000000] [--artifacts DIR]

`deploy/bootstrap.sh test` starts it in the background beside the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FUZZ = Path(__file__).parent
# executions per target in one CI run; exec/s measured on one idle core of the CI
# machine, after ~25 s of start-up (instrumentation) per target
RUNS = {
    "fuzz_frames.py": 600_000,  # ~25,000/s
    "fuzz_control.py": 500_000,  # ~14,000/s
    "fuzz_search_packets.py": 200_000,  # ~5,000/s
}
TIMEOUT_S = 1800  # per target: a hang is a failure too


def run(target: str, runs: int, artifacts: Path) -> tuple[int, str]:
    """(executions done, failure text or "") for one target."""
    try:
        result = subprocess.run(
            [
                sys.executable,
                str(FUZZ / target),
                f"-atheris_runs={runs}",
                f"-artifact_prefix={artifacts}/{target.removesuffix('.py')}-",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return 0, f"{target}: no result within {TIMEOUT_S} s"
    done = re.search(r"Done (\d+) in", result.stderr)
    if result.returncode != 0 or done is None:
        return 0, f"{target}: exit {result.returncode}\n{result.stderr[-3000:]}"
    return int(done.group(1)), ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every budget")
    parser.add_argument("--min-total", type=int, default=1_000_000)
    parser.add_argument("--artifacts", type=Path, default=None)
    args = parser.parse_args()
    if importlib.util.find_spec("atheris") is None:
        print("fuzz: atheris is not installed (pip install -e '.[dev]')", file=sys.stderr)
        return 1
    artifacts = args.artifacts or Path(tempfile.mkdtemp(prefix="hearth-fuzz-"))
    artifacts.mkdir(parents=True, exist_ok=True)
    total, failures = 0, []
    for target, runs in RUNS.items():
        started = time.monotonic()
        done, failure = run(target, max(1, int(runs * args.scale)), artifacts)
        took = time.monotonic() - started
        total += done
        print(f"fuzz {target}: {done} executions in {took:.0f} s", flush=True)
        if failure:
            failures.append(failure)
    print(f"fuzz total: {total} executions ({len(RUNS)} targets)", flush=True)
    for failure in failures:
        print(failure, file=sys.stderr)
    if failures:
        print(f"fuzz: crash inputs are under {artifacts}", file=sys.stderr)
        return 1
    if total < args.min_total:
        print(f"fuzz: {total} executions, fewer than {args.min_total}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
