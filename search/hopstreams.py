"""Streams to next search hops, kept open between searches.

A search packet costs a stream to the next hop; opening one costs a multistream
negotiation round trip, so streams are kept after a reply and reused. One packet
is in flight per stream (a stream is taken out while in use), so replies never
mix. Streams are kept per next hop only, whoever sent the packet being forwarded:
which stream a packet travels on says nothing about where it came from. Bounded
per peer and in total; a stream idle for `KEEP_IDLE_S` is closed (before the
serving side's own idle timeout). A stream that fails or is cancelled is
dropped, never kept. A kept stream the peer has closed (an older node answers
one packet per stream, then closes) is noticed when taken, or when the request
on it fails as `unreachable` with no answer: the request is then sent once more
on a fresh one (an error answer is never sent again: the hop would drop it as replayed).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from libp2p.network.stream.net_stream import StreamState
from libp2p.peer.id import ID

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.streams import ErrorAnswer, FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Message

KEEP_PER_PEER = 4
KEEP_TOTAL = 32
KEEP_IDLE_S = 20.0
CLOSE_S = 1.0  # how long a close or reset of a dropped stream may take
WRITE_S = 5.0  # how long writing a request may take once begun (not cancelled midway)
_DONE = (StreamState.CLOSE_READ, StreamState.CLOSE_BOTH, StreamState.RESET, StreamState.ERROR)


def _finished(stream: FrameStream) -> bool:
    """Whether the peer has closed or reset `stream` (py-libp2p's own state)."""
    muxed: Any = getattr(stream.stream, "muxed_stream", None)
    state = getattr(stream.stream, "_state", None)  # NetStream keeps it private
    return state in _DONE or any(getattr(muxed, flag, False) for flag in ("recv_closed", "closed"))


class HopStreams:
    """Open streams for one protocol, per next hop: `exchange` a request for its reply."""

    def __init__(
        self,
        host: HearthHost,
        protocol: str,
        *,
        per_peer: int = KEEP_PER_PEER,
        total: int = KEEP_TOTAL,
        idle_s: float = KEEP_IDLE_S,
    ) -> None:
        self.host = host
        self.protocol = protocol
        self.per_peer = per_peer
        self.total = total
        self.idle_s = idle_s
        self.opened = 0  # streams opened so far (a warm path opens none)
        self._idle: dict[str, list[tuple[float, FrameStream]]] = {}
        self._closing: list[FrameStream] = []  # found closed by the peer, to close here

    def kept(self) -> int:
        return sum(map(len, self._idle.values()))

    async def exchange(self, peer_id: str, addrs: list[str], request: Message) -> Message:
        """Send `request` to `peer_id` and return the frame it answers with; on a kept
        stream the peer turns out to have closed, once more on a fresh stream."""
        await self._sweep()
        kept = self._take(peer_id)
        if kept is not None:
            try:
                return await self._round(peer_id, kept, request)
            except HearthError as exc:  # an error answer is an answer: never sent again
                if exc.code is not ErrorCode.UNREACHABLE or isinstance(exc, ErrorAnswer):
                    raise
        stream = await self.host.open(peer_id, self.protocol, addrs)
        self.opened += 1
        return await self._round(peer_id, stream, request)

    async def _round(self, peer_id: str, stream: FrameStream, request: Message) -> Message:
        try:
            # a write cancelled halfway leaves the connection's byte stream broken (Noise
            # and pnet frame it), and every stream on it with it: a request is written
            # whole, or the stream is given up after WRITE_S
            with anyio.fail_after(WRITE_S, shield=True):
                await stream.send(request)
            reply = await stream.receive()
        except BaseException:  # failed, timed out or cancelled: a reply may still come
            await _drop(stream, reset=True)
            raise
        if (
            len(self._idle.get(peer_id, ())) >= self.per_peer
            or self.kept() >= self.total
            or _finished(stream)
        ):
            await _drop(stream)
        else:
            self._idle.setdefault(peer_id, []).append((time.monotonic(), stream))
        return reply

    def _take(self, peer_id: str) -> FrameStream | None:
        """The most recently used kept stream to `peer_id` the peer has not closed."""
        idle = self._idle.get(peer_id, [])
        while idle:
            _, stream = idle.pop()
            if not _finished(stream):
                return stream
            self._closing.append(stream)
        return None

    async def _sweep(self) -> None:
        """Close streams idle too long, and those found closed by the peer; reset those
        on a connection the peer has since replaced (it may be dead without TCP knowing,
        and a stream left open on it keeps it alive and picked for new streams)."""
        cutoff = time.monotonic() - self.idle_s
        replaced: list[FrameStream] = []
        for peer, idle in list(self._idle.items()):
            replaced += [s for _, s in idle if not self._on_newest(peer, s)]
            fresh = [(t, s) for t, s in idle if t > cutoff and s not in replaced]
            self._closing += [s for t, s in idle if t <= cutoff and s not in replaced]
            if fresh:
                self._idle[peer] = fresh
            else:
                del self._idle[peer]
        closing, self._closing = self._closing, []
        for stream in closing:
            await _drop(stream)
        for stream in replaced:
            await _drop(stream, reset=True)
            await self._close_if_unused(stream)

    async def _close_if_unused(self, stream: FrameStream) -> None:
        """Close the older connection `stream` ran on once it carries no stream (as
        `NewestConnectionWins` does when the new one arrives): a new stream must not be
        opened on a connection that may have died without a word."""
        for conn in self.host.host.get_network().get_connections(ID.from_base58(stream.peer_id)):
            if conn.muxed_conn is stream.stream.muxed_conn and not conn.get_streams():
                with anyio.move_on_after(CLOSE_S, shield=True):
                    await conn.close()

    def _on_newest(self, peer_id: str, stream: FrameStream) -> bool:
        """Whether `stream` runs on the newest connection to `peer_id`."""
        conns = self.host.host.get_network().get_connections(ID.from_base58(peer_id))
        return bool(conns) and conns[-1].muxed_conn is stream.stream.muxed_conn

    async def aclose(self) -> None:
        """Close every kept stream."""
        self._closing += [s for idle in self._idle.values() for _, s in idle]
        self._idle.clear()
        await self._sweep()


async def _drop(stream: FrameStream, *, reset: bool = False) -> None:
    with anyio.move_on_after(CLOSE_S, shield=True):
        await (stream.reset() if reset else stream.close())
