"""Frames over a libp2p stream: the sans-IO codec driven under anyio on trio."""

from __future__ import annotations

import contextlib
import struct

import trio
from libp2p.abc import IMuxedConn, IMuxedStream, INetStream, ISecureConn
from libp2p.network.stream.exceptions import StreamEOF
from libp2p.network.swarm import Swarm
from libp2p.peer.id import ID
from libp2p.stream_muxer.yamux.yamux import (
    FLAG_ACK,
    FLAG_SYN,
    HEADER_SIZE,
    TYPE_WINDOW_UPDATE,
    YAMUX_HEADER_FORMAT,
    Yamux,
    YamuxStream,
)

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import DEFAULT_MAX_FRAME, FrameDecoder, FrameError, encode
from hearth.protocol.wire.messages import ErrorFrame, Message

from .gate import gate_refusal
from .multiselect import NotServed, unanswered

READ_SIZE = 64 * 1024


class HalfWindowCredit(YamuxStream):
    """A Yamux stream that grants its peer more window only once half of it is read.

    That is go-yamux's rule (`GrowTo`; rust-yamux's too). py-libp2p 0.8.1 sends a
    WINDOW_UPDATE after every read that returns data ("partial slack"), so each small
    frame read cost a second frame back through Yamux, Noise, pnet and the socket,
    and the peer a read of it: half of a small-frame round trip's writes (and each
    quick update doubled the window, up to 16 MiB a stream). Carried for every
    stream of a Hearth host (`credit_streams`) until py-libp2p follows go-yamux.
    """

    async def _auto_tune_and_send_window_update(self, *, bytes_read: int = 0) -> None:
        buffered = len(self.conn.stream_buffers.get(self.stream_id, b""))
        if self.target_recv_window - (self.recv_window + buffered) >= self._grow_threshold():
            await super()._auto_tune_and_send_window_update(bytes_read=bytes_read)


class CreditYamux(Yamux):
    """Yamux whose streams, both ways, are `HalfWindowCredit`, and whose new streams
    say so with their first frame.

    py-libp2p writes a stream's SYN when it is opened and its ACK when it arrives, each
    its own Noise message and socket write (and the peer's read of it); a dialer then
    writes its first message, a listener its answer. Both are held here and go with the
    stream's first frame (rust-yamux opens lazily too; go-yamux and py-libp2p take a
    SYN or ACK on any frame): the plan request reaches the node in one message, and
    the node's answer with its ACK. A stream ended before it sent anything drops its
    held frame with it. Frames go out without py-libp2p's per-frame debug formatting.
    """

    async def _write_frame(self, data: bytes) -> None:
        _, kind, flags, stream_id, length = struct.unpack(YAMUX_HEADER_FORMAT, data[:HEADER_SIZE])
        held = _held(self)
        if kind == TYPE_WINDOW_UPDATE and flags in (FLAG_SYN, FLAG_ACK) and not length:
            held[stream_id] = data  # a new stream's: goes with its first frame
            return
        data = held.pop(stream_id, b"") + data if held else data
        async with self._write_lock:
            await self.secured_conn.write(data)
        await trio.lowlevel.checkpoint()

    def _finalize_stream_locked(self, stream: YamuxStream, *, fully_closed: bool) -> None:
        if fully_closed:  # reset by the peer before it was written to: nothing to say
            _held(self).pop(stream.stream_id, None)
        super()._finalize_stream_locked(stream, fully_closed=fully_closed)

    async def open_stream(self) -> YamuxStream:
        stream = await super().open_stream()
        stream.__class__ = HalfWindowCredit
        return stream

    async def accept_stream(self) -> IMuxedStream:
        stream = await super().accept_stream()
        if type(stream) is YamuxStream:
            stream.__class__ = HalfWindowCredit
        return stream


def _held(conn: Yamux) -> dict[int, bytes]:
    """`conn`'s held SYN and ACK frames by stream (its class was changed after it was
    built: the dict is made on first use)."""
    held: dict[int, bytes] = conn.__dict__.setdefault("_hearth_held", {})
    return held


def credit_streams(swarm: Swarm) -> None:
    """Make every Yamux connection of `swarm` a `CreditYamux`: Hearth's frame streams,
    and py-libp2p's own (a relay circuit's HOP and STOP streams carry a whole inner
    connection, where a WINDOW_UPDATE per read was one more relayed chunk per read).
    py-libp2p builds its `Yamux` itself whatever muxer class it is given; the class is
    changed before the connection starts reading."""
    muxers = swarm.upgrader.muxer_multistream
    new_conn = muxers.new_conn

    async def credited(conn: ISecureConn, peer_id: ID) -> IMuxedConn:
        muxed = await new_conn(conn, peer_id)
        if type(muxed) is Yamux:
            muxed.__class__ = CreditYamux
        return muxed

    muxers.new_conn = credited  # type: ignore[method-assign]


class ErrorAnswer(HearthError):
    """The error the peer answered with (an `ErrorFrame`), not a stream that broke."""


class FrameStream:
    """One libp2p stream carrying Hearth frames."""

    def __init__(self, stream: INetStream, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.stream = stream
        self.peer_id = str(stream.muxed_conn.peer_id)
        self.max_frame = max_frame
        self._decoder = FrameDecoder(max_frame)
        self._events: list[Message | FrameError] = []

    async def read_some(self) -> bytes:
        """Raw bytes from the peer; `b""` when it closed its side."""
        try:
            return await self.stream.read(READ_SIZE)
        except StreamEOF:
            return b""
        except NotServed as exc:  # the answer to the stream's optimistic proposal
            raise HearthError(
                ErrorCode.PROTOCOL_ERROR,
                f"{self.peer_id} does not serve {exc.protocol} (to this device)",
            ) from exc
        except Exception as exc:  # reset, closed connection, muxer failure
            raise self._lost(f"peer {self.peer_id} went away ({type(exc).__name__})") from exc

    async def write(self, data: bytes) -> None:
        try:
            await self.stream.write(data)
        except Exception as exc:
            raise self._lost(f"peer {self.peer_id} went away ({type(exc).__name__})") from exc

    def _lost(self, why: str) -> HearthError:
        """The stream ended under us: `unreachable`, or `refused` when the connection
        never answered its muxer proposal (the peer's gate closed it right after Noise)."""
        if unanswered(getattr(self.stream.muxed_conn, "secured_conn", None)):
            return gate_refusal(self.peer_id)
        return HearthError(ErrorCode.UNREACHABLE, why)

    async def send(self, message: Message) -> None:
        await self.write(encode(message, self.max_frame))

    async def receive(self) -> Message:
        """The next frame. A malformed one raises its typed error; so does an
        `ErrorFrame` from the peer; the peer closing raises `unreachable`."""
        while not self._events:
            data = await self.read_some()
            self._events = self._decoder.feed(data) if data else self._decoder.feed_eof()
            if not data and not self._events:
                raise self._lost(f"peer {self.peer_id} closed the stream")
        event = self._events.pop(0)
        if isinstance(event, FrameError):
            raise event.error
        if isinstance(event, ErrorFrame):
            raise ErrorAnswer(event.code, event.message, retry_after=event.retry_after)
        return event

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # already reset by the peer
            await self.stream.close()

    async def reset(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            await self.stream.reset()
