"""Review of kept search streams (RV1), two real hosts in this process on loopback: a
peer whose old connection went silent comes back on a new one; a stream kept on the
old connection must not hold the next request (nor keep the dead connection alive)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from libp2p.abc import INetConn
from libp2p.peer.id import ID

from hearth.protocol.transport.host import HearthHost, host_for_home
from hearth.protocol.transport.probe import lay_out_homes
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.messages import Health, HealthRequest
from hearth.search.hopstreams import HopStreams

from .test_relay_connect import SilenceableProxy

pytestmark = [pytest.mark.review, pytest.mark.timeout(90)]
PROTOCOL = "/hearth/test-kept/1"
LOOPBACK = ["/ip4/127.0.0.1/tcp/0"]


def test_a_stream_kept_on_a_connection_gone_silent_does_not_hold_the_next_request(
    tmp_path: Path,
) -> None:
    trio.run(kept_on_silent, tmp_path)


async def kept_on_silent(tmp: Path) -> None:
    homes = lay_out_homes(tmp)
    keeper, peer = host_for_home(homes["node"]).host, host_for_home(homes["phone"]).host

    async def serve(stream: FrameStream) -> None:
        while isinstance(await stream.receive(), HealthRequest):
            await stream.send(Health(peer_id=stream.peer_id))

    peer.handle(PROTOCOL, serve)
    async with keeper.run(LOOPBACK), peer.run(LOOPBACK), trio.open_nursery() as nursery:
        port = int(keeper.addrs()[0].split("/tcp/")[1].split("/")[0])
        proxy = SilenceableProxy(port)
        proxied = await nursery.start(proxy.serve)
        with trio.fail_after(20):
            await peer.connect(keeper.peer_id, [f"/ip4/127.0.0.1/tcp/{proxied}"])
            # the dialer's selection is optimistic: its connect returns before the keeper
            # has taken the connection in
            while not connections(keeper, peer.peer_id):
                await trio.sleep(0.05)
        streams = HopStreams(keeper, PROTOCOL)
        with trio.fail_after(20):
            assert isinstance(await streams.exchange(peer.peer_id, [], HealthRequest()), Health)
        assert streams.kept() == 1
        proxy.silence()  # the peer's network changed: its old connection is dead, not closed
        with trio.fail_after(20):
            await peer.disconnect(keeper.peer_id)  # the peer knows; the keeper does not
            await peer.connect(keeper.peer_id, keeper.addrs())  # and comes back
        with trio.fail_after(20):  # the keeper has taken the new connection in (as it
            while len(connections(keeper, peer.peer_id)) < 2:  # would long before a search)
                await trio.sleep(0.05)
        with trio.fail_after(8):  # before: the request waited on the dead connection
            assert isinstance(await streams.exchange(peer.peer_id, [], HealthRequest()), Health)
        await streams.aclose()
        nursery.cancel_scope.cancel()


def connections(host: HearthHost, peer_id: str) -> list[INetConn]:
    return host.host.get_network().get_connections(ID.from_base58(peer_id))
