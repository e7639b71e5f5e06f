"""Yamux flow control on Hearth's frame streams, two real hosts in this process (pnet +
Noise + Yamux + gate on loopback): a reader of small frames sends no WINDOW_UPDATE
per read, as go-yamux does, and a transfer several windows long still completes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
from libp2p.peer.id import ID
from libp2p.stream_muxer.yamux.yamux import DEFAULT_WINDOW_SIZE

from hearth.protocol.transport.host import HearthHost, host_for_home
from hearth.protocol.transport.probe import lay_out_homes
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.frames import encode
from hearth.protocol.wire.messages import Health, HealthRequest

pytestmark = pytest.mark.timeout(120)
PROTOCOL = "/hearth/test-credit/1"
LOOPBACK = ["/ip4/127.0.0.1/tcp/0"]


def connected(
    tmp: Path,
    serve: Callable[[FrameStream], Awaitable[None]],
    use: Callable[[HearthHost, str], Awaitable[None]],
) -> None:
    """Run `use` with a phone's host connected to a node (its peer id) that serves
    `PROTOCOL` with `serve`."""

    async def main() -> None:
        homes = lay_out_homes(tmp)
        node, phone = host_for_home(homes["node"]).host, host_for_home(homes["phone"]).host
        node.handle(PROTOCOL, serve)
        async with node.run(LOOPBACK), phone.run(LOOPBACK):
            with trio.fail_after(60):
                await phone.connect(node.peer_id, node.addrs())
                await use(phone, node.peer_id)

    trio.run(main)


def over_one_connection(
    tmp: Path,
    serve: Callable[[FrameStream], Awaitable[None]],
    use: Callable[[FrameStream], Awaitable[None]],
) -> None:
    """Run `use` on a phone's stream to a node that serves it with `serve`."""

    async def opened(phone: HearthHost, node: str) -> None:
        await use(await phone.open(node, PROTOCOL))

    connected(tmp, serve, opened)


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


def test_a_new_stream_says_so_with_its_first_frame_both_ways(tmp_path: Path) -> None:
    """A stream's SYN was its own Noise message and socket write, and so was the
    listener's ACK: a plan request reached the node in two messages, and its first
    answer came back in two (the ACK alone first), each a write, a read and a wake-up
    more on the way to the first token. Now the request goes in one, the ACK with the
    listener's answer; later streams on the connection too."""

    async def serve(stream: FrameStream) -> None:
        assert isinstance(await stream.receive(), HealthRequest)
        await stream.send(Health(peer_id=stream.peer_id))
        while await stream.read_some():  # open until the phone closes its side
            pass

    async def use(phone: HearthHost, node: str) -> None:
        connection = phone.host.get_network().get_connections(ID.from_base58(node))[0]
        secured = connection.muxed_conn.secured_conn
        sent: list[bytes] = []
        came: list[bytes] = []
        write_msg, read_msg = secured.conn.write_msg, secured.conn.read_msg

        async def counted_write(data: bytes) -> None:  # the real write, counted
            sent.append(data)
            await write_msg(data)

        async def counted_read() -> bytes:
            came.append(await read_msg())
            return came[-1]

        secured.conn.write_msg, secured.conn.read_msg = counted_write, counted_read
        for round_no in range(3):  # the first: the reader was waiting unpatched
            sent.clear()
            came.clear()
            stream = await phone.open(node, PROTOCOL)
            await stream.send(HealthRequest())
            assert isinstance(await stream.receive(), Health)
            if round_no:
                assert len(sent) == 1  # SYN, proposal and request together
                assert len(came) == 2  # ACK with the protocol's answer; the answer
            await stream.close()
            while await stream.read_some():  # until the node has closed too
                pass

    connected(tmp_path, serve, use)
