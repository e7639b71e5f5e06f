"""Framing: round trips, chunking, size limits and hostile bytes."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hearth.protocol.wire import messages as m
from hearth.protocol.wire.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from hearth.protocol.wire.frames import PREFIX, FrameDecoder, FrameError, decode, encode

from .strategies import MESSAGES, any_message


def test_every_frame_type_has_a_strategy() -> None:
    assert set(MESSAGES) == set(m.MESSAGE_TYPES.values())


@given(any_message)
def test_every_message_round_trips(message: m.Message) -> None:
    assert decode(encode(message)) == message


@given(st.lists(any_message, min_size=1, max_size=5), st.data())
def test_any_split_into_chunks_gives_the_same_events(messages, data) -> None:
    stream = b"".join(encode(x) for x in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    events = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        events += decoder.feed(stream[a:b])
    events += decoder.feed_eof()
    assert events == messages


@given(st.binary(max_size=2048), st.integers(1, 64))
def test_arbitrary_bytes_never_raise(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_frame=1024)
    events = []
    for i in range(0, len(data), chunk):
        events += decoder.feed(data[i : i + chunk])
    events += decoder.feed_eof()
    for event in events:
        assert isinstance(event, m.Message | FrameError)
        if isinstance(event, FrameError):
            assert event.code is ErrorCode.PROTOCOL_ERROR


def test_oversize_prefix_is_refused_before_the_body_is_buffered() -> None:
    decoder = FrameDecoder(max_frame=1024)
    events = decoder.feed(PREFIX.pack(1 << 30) + b"x" * 10)
    assert len(events) == 1 and events[0].fatal
    assert "exceeds" in events[0].error.message
    assert decoder.buffered == 0
    assert decoder.feed(b"more") == []  # closed: the stream cannot resync


def test_frame_at_the_limit_is_accepted_and_one_over_is_not() -> None:
    message = m.Token(request_id="r", text="x" * 100)
    frame = encode(message)
    size = len(frame) - PREFIX.size
    assert FrameDecoder(max_frame=size).feed(frame) == [message]
    assert isinstance(FrameDecoder(max_frame=size - 1).feed(frame)[0], FrameError)


def test_encoder_refuses_a_frame_the_peer_would_reject() -> None:
    with pytest.raises(LocalProtocolError):
        encode(m.Token(request_id="r", text="x" * 2000), max_frame=1024)


def test_truncated_frame_is_a_fatal_error_at_eof() -> None:
    frame = encode(m.Final(request_id="r", answer="done"))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:-3]) == []
    (event,) = decoder.feed_eof()
    assert isinstance(event, FrameError) and event.fatal


def _frame(body: bytes) -> bytes:
    return PREFIX.pack(len(body)) + body


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\xc1", "not valid msgpack"),
        (msgpack.packb([1, 2, 3]), "not a map"),
        (msgpack.packb({"t": "nope", "v": 1}), "unknown frame type"),
        (msgpack.packb({"t": "final", "v": 2, "request_id": "r", "answer": ""}), "version"),
        (msgpack.packb({"t": "final", "v": 1, "answer": "x"}), "request_id"),
        (msgpack.packb({"t": "final", "v": 1, "request_id": "r", "answer": [1]}), "answer"),
        (msgpack.packb({"t": "pair_request", "v": 1, "token": b"short"}), "token"),
    ],
)
def test_bad_frames_become_typed_errors_and_the_stream_goes_on(body: bytes, reason: str) -> None:
    good = m.Progress(request_id="r", stage="s")
    bad, after = FrameDecoder().feed(_frame(body) + encode(good))
    assert isinstance(bad, FrameError) and not bad.fatal
    assert bad.code is ErrorCode.PROTOCOL_ERROR and reason in bad.error.message
    assert after == good


def test_unknown_fields_are_ignored_within_a_version() -> None:
    body = msgpack.packb({"t": "final", "v": 1, "request_id": "r", "answer": "a", "new": 7})
    assert decode(_frame(body)) == m.Final(request_id="r", answer="a")


def test_decode_of_a_single_bad_frame_raises_remote_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        decode(_frame(b"\xc1"))
