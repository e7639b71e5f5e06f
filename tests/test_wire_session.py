"""The plan-session state machine, driven from both ends without a network."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hearth.protocol.wire import messages as m
from hearth.protocol.wire.errors import LocalProtocolError
from hearth.protocol.wire.frames import FrameError
from hearth.protocol.wire.session import ENDED, PlanSession, Side, State

SIG = m.Signed(payload=b"plan", signature=bytes(64))


def _pair() -> tuple[PlanSession, PlanSession]:
    return PlanSession(Side.PHONE), PlanSession(Side.NODE)


def _deliver(sender: PlanSession, receiver: PlanSession, message: m.Message) -> list:
    return receiver.receive_data(sender.send(message))


def test_a_two_round_session_ends_in_final_with_both_ends_agreeing_on_the_hashes() -> None:
    phone, node = _pair()
    request = m.PlanRequest(
        request_id="r1", conversation=[m.ChatMessage(role="user", content="hi")]
    )
    assert _deliver(phone, node, request) == [request]
    assert phone.request_hash == node.request_hash is not None
    _deliver(node, phone, m.Token(request_id="r1", text="thinking"))
    _deliver(node, phone, m.ActionPlan(request_id="r1", plan=SIG))
    assert phone.state is node.state is State.EXECUTING
    assert phone.transcript_at_plan == node.transcript_at_plan
    obs = m.Observations(request_id="r1", plan_id="p1", round=1, results=[])
    _deliver(phone, node, obs)
    _deliver(node, phone, m.ActionPlan(request_id="r1", plan=SIG))
    assert phone.round == node.round == 2
    _deliver(phone, node, obs.model_copy(update={"round": 2}))
    _deliver(node, phone, m.Final(request_id="r1", answer="done", rounds=2))
    assert phone.state is node.state is State.DONE
    assert phone.transcript_hash == node.transcript_hash


def test_out_of_state_frame_from_the_peer_is_a_fatal_protocol_error() -> None:
    phone = PlanSession(Side.PHONE)
    # the node sends Final before any request: illegal for the phone to receive
    rogue = PlanSession(Side.NODE)
    rogue.state = State.PLANNING
    data = rogue.send(m.Final(request_id="r", answer="x"))
    (error,) = phone.receive_data(data)
    assert isinstance(error, FrameError) and error.fatal
    assert phone.state is State.FAILED


def test_sending_out_of_state_is_a_local_protocol_error() -> None:
    phone, _ = _pair()
    with pytest.raises(LocalProtocolError):
        phone.send(m.Observations(request_id="r", plan_id="p", round=1, results=[]))


def test_frames_for_another_request_are_refused() -> None:
    phone, node = _pair()
    _deliver(phone, node, m.PlanRequest(request_id="r1", conversation=[]))
    other = PlanSession(Side.NODE)
    other.state = State.PLANNING
    (error,) = phone.receive_data(other.send(m.Token(request_id="r2", text="x")))
    assert isinstance(error, FrameError) and "request" in error.error.message


def test_observations_for_the_wrong_round_are_refused() -> None:
    phone, node = _pair()
    _deliver(phone, node, m.PlanRequest(request_id="r", conversation=[]))
    _deliver(node, phone, m.ActionPlan(request_id="r", plan=SIG))
    with pytest.raises(LocalProtocolError):
        phone.send(m.Observations(request_id="r", plan_id="p", round=2, results=[]))


def test_frames_in_flight_after_our_cancel_are_dropped() -> None:
    phone, node = _pair()
    _deliver(phone, node, m.PlanRequest(request_id="r", conversation=[]))
    in_flight = node.send(m.Token(request_id="r", text="a"))
    phone.send(m.Cancel(request_id="r"))
    assert phone.receive_data(in_flight) == []
    assert phone.state is State.CANCELLED


@given(st.binary(max_size=512))
def test_garbage_never_raises_out_of_a_session(data: bytes) -> None:
    phone, node = _pair()
    node.receive_data(phone.send(m.PlanRequest(request_id="r", conversation=[])))
    events = phone.receive_data(data)
    if any(isinstance(e, FrameError) for e in events):
        assert phone.state is State.FAILED
    events += phone.receive_eof()
    assert all(isinstance(e, m.Message | FrameError) for e in events)
    assert phone.state in ENDED  # the stream closed: the session is over, one way or another
