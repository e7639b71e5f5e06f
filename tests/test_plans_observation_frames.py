"""Later frames of a plan session grow too: the observations a phone sends back carry its
tools' results (an MCP call: `RESULT_CAP` characters, as UTF-8 up to 4 bytes each), which
can add up past one frame; the send then failed `protocol_error` after the steps had run."""

from __future__ import annotations

import pytest

from hearth.companion.egress import Destination, Egress, Policy, StepOutcome
from hearth.companion.labels import Labels
from hearth.companion.tools.mcp import RESULT_CAP
from hearth.protocol.transport.plans import within_a_frame
from hearth.protocol.wire.errors import LocalProtocolError
from hearth.protocol.wire.frames import decode, encode
from hearth.protocol.wire.messages import Observation, Observations

pytestmark = pytest.mark.hostile


def test_capped_tool_results_of_one_round_fit_the_frame_they_travel_in() -> None:
    """Four MCP results of emoji, each within the tools' cap, as the phone's egress shapes
    them for its home node: the Observations frame is made to fit (the largest results
    are replaced by a note of their size), so the session goes on instead of ending
    `protocol_error` after the steps ran."""
    text = "😀" * RESULT_CAP  # 4 bytes each in UTF-8: 256 KiB a result
    egress = Egress(Policy())
    outcomes = [
        StepOutcome(f"s{i}", "ok", Labels(), result={"content": [text], "structured": None})
        for i in range(1, 5)
    ]
    results = [egress.observation(o, Destination.HOME) for o in outcomes]
    big = Observations(request_id="r1", plan_id="p1", round=1, results=results)
    with pytest.raises(LocalProtocolError):
        encode(big)  # as sent before
    sent = decode(encode(within_a_frame(big)))
    assert isinstance(sent, Observations)
    assert [r.step_id for r in sent.results] == ["s1", "s2", "s3", "s4"]
    assert [r.status for r in sent.results] == ["ok"] * 4
    kept = [r for r in sent.results if r.result == results[0].result]
    noted = [r for r in sent.results if isinstance(r.result, str) and "too large" in r.result]
    assert len(kept) == 3 and len(noted) == 1  # only as many taken out as needed
    assert all(r.untrusted == results[0].untrusted for r in sent.results)


def test_observations_that_fit_are_sent_as_they_are() -> None:
    small = Observations(
        request_id="r1",
        plan_id="p1",
        round=1,
        results=[Observation(step_id="s1", status="ok", result="x")],
    )
    assert within_a_frame(small) == small
