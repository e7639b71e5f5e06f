"""The plan-session state machine of `/hearth/plan/1`, for either end.

Like h11's `Connection`: `send(message)` checks the transition and returns the
bytes to write; `receive_data(bytes)` returns the events the peer's bytes complete.
A frame that is illegal in the current state is a typed protocol error, never an
assert. The session also keeps what plans are bound to: the request hash (SHA-256
of the raw `PlanRequest` body) and the transcript hash (of every frame so far).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

from .errors import ErrorCode, HearthError, LocalProtocolError, RemoteProtocolError
from .frames import DEFAULT_MAX_FRAME, PREFIX, Event, FrameDecoder, FrameError, decode_body, encode
from .messages import (
    ActionPlan,
    Cancel,
    ErrorFrame,
    Final,
    Message,
    Observations,
    PlanRequest,
    Progress,
    Token,
)


class Side(StrEnum):
    """Which end of a plan session this is."""

    PHONE = "phone"
    NODE = "node"


class State(StrEnum):
    """Session states. PLANNING: the node's turn; EXECUTING: the phone's."""

    IDLE = "idle"
    PLANNING = "planning"
    EXECUTING = "executing"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = frozenset({State.DONE, State.FAILED, State.CANCELLED})

# (sender, state, frame type) -> next state
TRANSITIONS: dict[tuple[Side, State, type[Message]], State] = {
    (Side.PHONE, State.IDLE, PlanRequest): State.PLANNING,
    (Side.NODE, State.PLANNING, Progress): State.PLANNING,
    (Side.NODE, State.PLANNING, Token): State.PLANNING,
    (Side.NODE, State.PLANNING, ActionPlan): State.EXECUTING,
    (Side.PHONE, State.EXECUTING, Observations): State.PLANNING,
    (Side.NODE, State.PLANNING, Final): State.DONE,
}
for _side in Side:
    for _state in (State.IDLE, State.PLANNING, State.EXECUTING):
        TRANSITIONS[(_side, _state, Cancel)] = State.CANCELLED
        TRANSITIONS[(_side, _state, ErrorFrame)] = State.FAILED


class PlanSession:
    """One plan session seen from `side`."""

    def __init__(self, side: Side, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.side = side
        self.peer = Side.NODE if side is Side.PHONE else Side.PHONE
        self.state = State.IDLE
        self.request_id: str | None = None
        self.request_hash: bytes | None = None
        self.round = 0
        self.plan_id: str | None = None
        self.transcript_at_plan: bytes | None = None
        self._max_frame = max_frame
        self._decoder = FrameDecoder(max_frame)
        self._transcript = hashlib.sha256()
        self._cancel_sent = False

    @property
    def transcript_hash(self) -> bytes:
        """SHA-256 over the bytes of every frame of the session so far, in order."""
        return self._transcript.copy().digest()

    def send(self, message: Message) -> bytes:
        """The bytes to write for `message`; `LocalProtocolError` if illegal now."""
        self._check_request_id(message, LocalProtocolError)
        if self.side is Side.PHONE and isinstance(message, Observations):
            self._check_observations(message, LocalProtocolError)
        nxt = TRANSITIONS.get((self.side, self.state, type(message)))
        if nxt is None:
            raise LocalProtocolError(f"cannot send {message.TYPE} in state {self.state}")
        data = encode(message, self._max_frame)
        self._record(message, data)
        self.state = nxt
        self._cancel_sent = isinstance(message, Cancel)
        return data

    def receive_data(self, data: bytes) -> list[Event]:
        """Events completed by bytes from the peer; out-of-state frames end the session."""
        events: list[Event] = []
        for item in self._decoder.feed_raw(data):
            events.extend(self._on_frame(item))
        return events

    def receive_eof(self) -> list[Event]:
        """The peer closed its side of the stream."""
        events: list[Event] = list(self._decoder.feed_eof())
        if self.state not in ENDED:
            self.state = State.FAILED
            gone = HearthError(ErrorCode.UNREACHABLE, "the peer closed the stream mid-session")
            events.append(FrameError(gone, True))
        return events

    def _on_frame(self, item: bytes | FrameError) -> list[Event]:
        if self.state in ENDED and self._cancel_sent:
            return []  # frames in flight when we cancelled: dropped, not an error
        try:
            if isinstance(item, FrameError):
                raise item.error
            event = decode_body(item)
            nxt = TRANSITIONS.get((self.peer, self.state, type(event)))
            if nxt is None:
                raise RemoteProtocolError(f"{event.TYPE} not allowed in state {self.state}")
            self._check_request_id(event, RemoteProtocolError)
            if isinstance(event, Observations):
                self._check_observations(event, RemoteProtocolError)
        except RemoteProtocolError as exc:
            # in a session every bad frame is fatal: the plan binding depends on the transcript
            self.state = State.FAILED
            return [FrameError(exc, fatal=True)]
        self._record(event, PREFIX.pack(len(item)) + item)
        self.state = nxt
        return [event]

    def _record(self, message: Message, data: bytes) -> None:
        if isinstance(message, PlanRequest):
            self.request_id = message.request_id
            self.request_hash = hashlib.sha256(data[PREFIX.size :]).digest()
        elif isinstance(message, ActionPlan):
            self.transcript_at_plan = self.transcript_hash
            self.round += 1
        self._transcript.update(data)

    def _check_request_id(
        self, message: Message, error: type[LocalProtocolError] | type[RemoteProtocolError]
    ) -> None:
        rid = getattr(message, "request_id", None)
        if self.request_id is not None and rid is not None and rid != self.request_id:
            raise error(f"{message.TYPE} for request {rid!r} in session {self.request_id!r}")

    def _check_observations(
        self, message: Observations, error: type[LocalProtocolError] | type[RemoteProtocolError]
    ) -> None:
        if message.round != self.round:
            raise error(f"observations for round {message.round}, session is at {self.round}")
