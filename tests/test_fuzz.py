"""Short coverage-guided fuzz runs (atheris) of the frame decoder and the search
packet parsers; a crash, or any exception but the typed ones, fails the run."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).parent / "fuzz"
RUNS = 30000


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris not installed")
@pytest.mark.parametrize("target", ["fuzz_frames.py", "fuzz_search_packets.py"])
def test_short_fuzz_run_finds_nothing(target: str, tmp_path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(FUZZ / target),
            f"-atheris_runs={RUNS}",
            f"-artifact_prefix={tmp_path}/",
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    done = re.search(r"Done (\d+) in", result.stderr)
    assert done and int(done.group(1)) == RUNS  # every execution ran
