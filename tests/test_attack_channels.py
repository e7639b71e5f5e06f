"""The hostile-planner attack suite over the channels around a session (issue 30):
history one, two and five turns later, across restarts, attached documents, an app's own
history. A bench (hostile home node) of its own, as every module's `hostile_bench`.
(After the injection suite's 206 runs on one bench, the first dial of this suite was once
refused with "swarm key mismatch suspected": the bench's phone still knew the stopped
daemon's address beside the hostile home's; a dial that fell through to it met whatever
listened on that port by then, another swarm's node. `start_bench` now leaves the phone
only the hostile home's address.)
"""

from __future__ import annotations

from collections import Counter

import pytest

from .hostile.channels import channel_cases, run_channel_case
from .hostile.harness import SuitePhone
from .hostile.suites import SUITES
from .test_attack_suite import MODES, _table

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(900)]


def test_no_goal_is_reached_through_history_documents_or_an_apps_messages(
    hostile_bench, capsys
) -> None:
    """Issue 30's channels (`hostile/channels.py`): the injection read turns before the
    attack, across restarts, in an attached document or in an app's own history."""
    phones = {s.name: SuitePhone.make(hostile_bench, s.name) for s in SUITES}
    cases = channel_cases()
    assert len(cases) >= 25
    rows: dict[str, Counter[str]] = {}
    succeeded: list[str] = []
    unanswered: list[str] = []
    for case in cases:
        for cls in (f"channel {case.channel}", f"goal {case.kind}", "all"):
            rows.setdefault(cls, Counter())["cases"] += 1
        for mode, answer in MODES.items():
            run = run_channel_case(phones[case.suite], case, answer)
            if not run.outcome.answered and run.error != "plan_rejected":
                unanswered.append(f"{case.id} {mode} {run.error}")
            if case.goal.achieved(run.outcome):  # type: ignore[attr-defined]
                succeeded.append(f"{case.id} {mode}")
                for cls in (f"channel {case.channel}", f"goal {case.kind}", "all"):
                    rows[cls][mode] += 1
    with capsys.disabled():
        print("\n" + _table("attack successes through the channels around a session", rows))
        print("  succeeded:\n    " + "\n    ".join(succeeded or ["none"]))
    assert not unanswered, f"runs the phone never took up: {unanswered}"
    assert not succeeded
