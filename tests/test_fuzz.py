"""Short coverage-guided fuzz runs (atheris) of the frame decoder, the search packet
parsers and the control-request parser; a crash, or any exception but the typed
ones, fails the run. The CI budget (>= 10^6 executions) is `tests/fuzz/run_all.py`,
which `deploy/bootstrap.sh test` runs beside the suite."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .fuzz.run_all import run
from .installed import missing

FUZZ = Path(__file__).parent / "fuzz"
RUNS = 10000  # a smoke run; the CI budget is run_all.py


@pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None,
    reason=missing("atheris") if sys.version_info < (3, 12) else "atheris needs Python < 3.12",
)
@pytest.mark.parametrize("target", ["fuzz_frames.py", "fuzz_search_packets.py", "fuzz_control.py"])
def test_short_fuzz_run_finds_nothing(target: str, tmp_path) -> None:
    done, failure = run(target, RUNS, tmp_path)
    assert failure == "", failure
    assert done == RUNS  # every execution ran


SCHEMA_RUNS = 600  # ~20-50 schemas/s on 2 busy cores: about a minute


def test_schema_fuzz_compiles_every_grammar_within_bounds(tiny_models) -> None:
    """Arbitrary tool schemas → check_schemas → grammar → llama.cpp, in a child under a
    1.5 GiB address-space limit (`tests/fuzz/fuzz_schemas.py`, hypothesis-driven)."""
    result = subprocess.run(
        [
            sys.executable,
            str(FUZZ / "fuzz_schemas.py"),
            str(tiny_models[1]),
            f"--count={SCHEMA_RUNS}",
            "--max-mb=1536",
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"schema fuzz: {stats}")
    assert stats["schemas"] == SCHEMA_RUNS and stats["compiled"] > SCHEMA_RUNS // 4
