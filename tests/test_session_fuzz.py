"""Stateful property test of the plan-session state machine, both ends at once.

Random sequences of sends (legal and illegal) from either side: an illegal send is a
LocalProtocolError and changes nothing; a legal one is received by the other end
without error; both ends always agree on the state and the transcript.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from hearth.protocol.wire import messages as m
from hearth.protocol.wire.errors import LocalProtocolError
from hearth.protocol.wire.frames import FrameError
from hearth.protocol.wire.session import PlanSession, Side

RID = "fuzz"
SIG = m.Signed(payload=b"p", signature=bytes(64))


def frames(round_no: int) -> dict[str, list[m.Message]]:
    return {
        "phone": [
            m.PlanRequest(request_id=RID, conversation=[]),
            m.Observations(request_id=RID, plan_id="p", round=max(round_no, 1), results=[]),
            m.Cancel(request_id=RID),
            m.ErrorFrame(code="internal", message="x", request_id=RID),
        ],
        "node": [
            m.Progress(request_id=RID, stage="s"),
            m.Token(request_id=RID, text="t"),
            m.ActionPlan(request_id=RID, plan=SIG),
            m.Final(request_id=RID, answer="a"),
            m.Cancel(request_id=RID),
            m.ErrorFrame(code="busy", message="x", request_id=RID),
        ],
    }


class BothEnds(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ends = {"phone": PlanSession(Side.PHONE), "node": PlanSession(Side.NODE)}

    @rule(who=st.sampled_from(["phone", "node"]), pick=st.integers(0, 5))
    def send(self, who: str, pick: int) -> None:
        sender = self.ends[who]
        receiver = self.ends["node" if who == "phone" else "phone"]
        options = frames(sender.round)[who]
        message = options[pick % len(options)]
        state_before = sender.state
        try:
            data = sender.send(message)
        except LocalProtocolError:
            assert sender.state is state_before  # refused sends change nothing
            return
        events = receiver.receive_data(data)
        assert not any(isinstance(e, FrameError) for e in events), events

    @invariant()
    def both_ends_agree(self) -> None:
        phone, node = self.ends["phone"], self.ends["node"]
        assert phone.state is node.state
        assert phone.round == node.round
        assert phone.transcript_hash == node.transcript_hash


BothEnds.TestCase.settings = settings(max_examples=150, stateful_step_count=20, deadline=None)
test_plan_session_state_machine = BothEnds.TestCase
