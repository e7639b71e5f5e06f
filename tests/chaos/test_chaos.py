"""A short chaos run (20 points, fixed seed) in the suite; the full one is
`python -m tests.chaos.run --seed 33 --points 200` (tests/chaos/run.py)."""

from __future__ import annotations

import pytest

from ..installed import NOT_RUN
from .run import chaos


@pytest.mark.timeout(1800)  # 20 points: minutes on a loaded 2-core machine
def test_twenty_kill_points_lose_nothing_and_run_nothing_twice(tmp_path) -> None:
    totals = chaos(tmp_path, seed=33, points=20)
    report = totals.report()
    assert sum(report["events"].values()) == 20
    assert report["steps_run_twice"] == 0, report["details"]["twice"]
    assert report["requests_lost"] == 0, report["details"]["lost"]
    assert report["requests_failed_yet_kept"] == 0, report["details"]["failed_yet_kept"]
    assert report["broken"] == []
    assert sum(report["requests"].values()) >= 20  # each request ended with a typed outcome
    answered = sum(n for outcome, n in report["requests"].items() if outcome.startswith("answered"))
    assert answered >= 5, report["requests"]  # the run asked a working system, not a dead one
    NOT_RUN.extend(f"chaos event {kind}: {why}" for kind, why in report["skipped"].items())
