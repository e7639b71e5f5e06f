"""Framing: a 4-byte big-endian length prefix and one msgpack map per frame.

`encode(message)` gives the bytes to write; `FrameDecoder.feed(data)` takes bytes as
they arrive and returns the events they complete: decoded messages, or a
`FrameError` for a frame that is malformed, of an unknown type, oversize or
truncated. The size limit is enforced from the prefix, before any body is buffered.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack
from pydantic import ValidationError

from .errors import ErrorCode, HearthError, LocalProtocolError, RemoteProtocolError
from .messages import MESSAGE_TYPES, PROTOCOL_VERSION, Message

DEFAULT_MAX_FRAME = 1 << 20
PREFIX = struct.Struct(">I")


def encode_body(message: Message) -> bytes:
    """The msgpack map of one message, without the length prefix."""
    # the serializer model_dump calls, without its per-call argument handling (hot path)
    fields: dict[str, Any] = message.__pydantic_serializer__.to_python(message)
    fields["t"] = message.TYPE
    fields["v"] = PROTOCOL_VERSION
    body: bytes = msgpack.packb(fields, use_bin_type=True)
    return body


def encode(message: Message, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """The bytes of one frame; refuses to produce a frame the peer would reject."""
    body = encode_body(message)
    if len(body) > max_frame:
        raise LocalProtocolError(f"{message.TYPE} frame of {len(body)} bytes exceeds {max_frame}")
    return PREFIX.pack(len(body)) + body


def decode_body(body: bytes) -> Message:
    """One message from a frame body; `RemoteProtocolError` for anything malformed."""
    try:
        fields = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise RemoteProtocolError(f"frame is not valid msgpack ({type(exc).__name__})") from exc
    if not isinstance(fields, dict):
        raise RemoteProtocolError(f"frame is a msgpack {type(fields).__name__}, not a map")
    tag = fields.pop("t", None)
    version = fields.pop("v", None)
    if version != PROTOCOL_VERSION:
        raise RemoteProtocolError(f"unsupported protocol version {version!r}")
    cls = MESSAGE_TYPES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise RemoteProtocolError(f"unknown frame type {str(tag)[:40]!r}")
    try:
        message: Message = cls.__pydantic_validator__.validate_python(fields)  # model_validate
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<frame>'}: {err['msg']}"
            for err in exc.errors()[:3]
        )
        raise RemoteProtocolError(f"invalid {tag} frame: {problems}") from exc
    return message


def decode(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> Message:
    """Exactly one whole frame from `data` (for tests and one-shot exchanges)."""
    decoder = FrameDecoder(max_frame)
    events = decoder.feed(data) + decoder.feed_eof()
    if len(events) != 1:
        raise RemoteProtocolError(f"expected one frame, got {len(events)} events")
    event = events[0]
    if isinstance(event, FrameError):
        raise event.error
    return event


@dataclass(frozen=True)
class FrameError:
    """Event: a frame could not be decoded. `fatal` means the stream cannot resync."""

    error: HearthError
    fatal: bool

    @property
    def code(self) -> ErrorCode:
        return self.error.code


Event = Message | FrameError


class FrameDecoder:
    """Incremental decoder: `feed(bytes)` → events, `feed_eof()` → final events.

    After a fatal error (oversize prefix, truncation) the decoder is closed and
    ignores further input: the stream can no longer be trusted to be in sync.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._need: int | None = None  # body length, once the prefix is read
        self.closed = False

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Event]:
        """Add received bytes; return the events they complete."""
        return [_decoded(item) for item in self.feed_raw(data)]

    def feed_raw(self, data: bytes) -> list[bytes | FrameError]:
        """Like `feed`, but whole frame bodies are returned undecoded."""
        if self.closed:
            return []
        if not self._buffer and self._need is None and len(data) >= PREFIX.size:
            (length,) = PREFIX.unpack_from(data)
            if len(data) == PREFIX.size + length <= PREFIX.size + self.max_frame:
                return [bytes(data[PREFIX.size :])]  # exactly one frame: not buffered
        self._buffer += data
        items: list[bytes | FrameError] = []
        while not self.closed:
            if self._need is None:
                if len(self._buffer) < PREFIX.size:
                    break
                (length,) = PREFIX.unpack_from(self._buffer)
                if length > self.max_frame:
                    self._close()
                    error = RemoteProtocolError(
                        f"frame of {length} bytes exceeds the {self.max_frame}-byte limit"
                    )
                    items.append(FrameError(error, fatal=True))
                    break
                del self._buffer[: PREFIX.size]
                self._need = length
            if len(self._buffer) < self._need:
                break
            items.append(bytes(self._buffer[: self._need]))
            del self._buffer[: self._need]
            self._need = None
        return items

    def feed_eof(self) -> list[Event]:
        """The peer closed its side: a partial frame left over is a truncation."""
        if self.closed:
            return []
        partial = self._need is not None or bool(self._buffer)
        self._close()
        if partial:
            return [FrameError(RemoteProtocolError("stream ended inside a frame"), fatal=True)]
        return []

    def _close(self) -> None:
        self.closed = True
        self._buffer.clear()
        self._need = None


def _decoded(item: bytes | FrameError) -> Event:
    if isinstance(item, FrameError):
        return item
    try:
        return decode_body(item)
    except RemoteProtocolError as exc:
        return FrameError(exc, fatal=False)
