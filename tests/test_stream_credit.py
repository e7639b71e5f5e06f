"""Yamux flow control on Hearth's frame streams, two real hosts in this process (pnet +
Noise + Yamux + gate on loopback): a reader of small frames sends no WINDOW_UPDATE
per read, as go-yamux does, and a transfer several windows long still completes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
from libp2p.stream_muxer.yamux.yamux import DEFAULT_WINDOW_SIZE

from hearth.protocol.transport.host import host_for_home
from hearth.protocol.transport.probe import lay_out_homes
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.frames import encode
from hearth.protocol.wire.messages import Health, HealthRequest

pytestmark = pytest.mark.timeout(120)
PROTOCOL = "/hearth/test-credit/1"
LOOPBACK = ["/ip4/127.0.0.1/tcp/0"]


def over_one_connection(
    tmp: Path,
    serve: Callable[[FrameStream], Awaitable[None]],
    use: Callable[[FrameStream], Awaitable[None]],
) -> None:
    """Run `use` on a phone's stream to a node that serves it with `serve`."""

    async def main() -> None:
        homes = lay_out_homes(tmp)
        node, phone = host_for_home(homes["node"]).host, host_for_home(homes["phone"]).host
        node.handle(PROTOCOL, serve)
        async with node.run(LOOPBACK), phone.run(LOOPBACK):
            with trio.fail_after(60):
                await phone.connect(node.peer_id, node.addrs())
                await use(await phone.open(node.peer_id, PROTOCOL))

    trio.run(main)


def sender_window(stream: FrameStream) -> int:
    """What the peer has let this end send, as this end's Yamux stream counts it."""
    window: int = stream.stream.muxed_stream.send_window  # type: ignore[attr-defined]
    return window


def test_small_frames_read_by_the_peer_cost_no_window_update_each(tmp_path: Path) -> None:
    trips = 50
    request = encode(HealthRequest())

    async def serve(stream: FrameStream) -> None:
        while isinstance(await stream.receive(), HealthRequest):
            await stream.send(Health(peer_id=stream.peer_id))

    async def use(stream: FrameStream) -> None:
        await stream.send(HealthRequest())  # the protocol's proposal goes with the first
        assert isinstance(await stream.receive(), Health)
        start = sender_window(stream)
        for _ in range(trips):
            await stream.send(HealthRequest())
            assert isinstance(await stream.receive(), Health)
        # the node read every request and granted nothing back for them (py-libp2p's
        # own rule sends one WINDOW_UPDATE per read and would have refilled the window)
        assert sender_window(stream) == start - trips * len(request)

    over_one_connection(tmp_path, serve, use)


def test_a_transfer_of_several_windows_completes_both_ways(tmp_path: Path) -> None:
    size = 3 * DEFAULT_WINDOW_SIZE + 1000
    payload = bytes(i % 251 for i in range(size))

    async def serve(stream: FrameStream) -> None:
        got = bytearray()
        while len(got) < size:
            got += await stream.read_some()
        await stream.write(bytes(got))

    async def use(stream: FrameStream) -> None:
        await stream.write(payload)
        back = bytearray()
        while len(back) < size:
            chunk = await stream.read_some()
            assert chunk, "the node closed the stream before echoing everything"
            back += chunk
        assert back == payload

    over_one_connection(tmp_path, serve, use)
