"""Review of kept search streams (RV1), real node processes on loopback: a next hop's
error answer on a kept stream is an answer, not a stream the peer closed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from hearth.companion.swarmkit import RunningNode
from hearth.protocol.transport.host import HearthHost, host_for_home
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import OnionKeys, SearchPacket, SearchReply
from hearth.protocol.wire.roster import Roster
from hearth.search import route
from hearth.search.hopstreams import HopStreams
from hearth.search.index import INDEX_FILE, FtsIndex
from hearth.search.onion import EpochKeys, announce
from hearth.search.packets import seal_reply

from .test_search_streams import _run_host, as_phone, nodes_known, swarm

__all__ = ["swarm"]  # the module fixture, shared
pytestmark = pytest.mark.timeout(240)


async def serve_exit_that_fails(
    old: Path, home: RunningNode, nursery: trio.Nursery, working: list[bool]
) -> HearthHost:
    """A search exit that answers while `working[0]`, then resets every stream (its
    backend broke, say). Its onion key is pushed to the home (the founder)."""
    host, _, _, identity = host_for_home(old)
    keys, index = EpochKeys(time.time()), FtsIndex(old / INDEX_FILE)

    async def serve(stream: FrameStream) -> None:
        packet = await stream.receive()
        assert isinstance(packet, SearchPacket)
        if not working[0]:
            await stream.reset()
            return
        peeled = keys.peel(packet.data, time.time())
        reply, _ = seal_reply(peeled.reply_key, await index.search(*peeled.query()))
        await stream.send(SearchReply(data=reply))

    host.handle(route.SEARCH_PROTOCOL, serve)
    await nursery.start(_run_host, host)
    own = keys.announcement(host.peer_id, host.addrs())
    stream = await host.open(home.peer_id, route.SEARCH_PROTOCOL, home.addrs)
    await stream.send(OnionKeys(announcements=[announce(identity, own)]))
    await stream.close()
    return host


def test_an_error_answer_on_a_kept_stream_is_not_sent_again(swarm) -> None:
    """The first hop answers `unreachable` (its next hop failed) on a kept stream:
    before, the sender took that for a stream the peer had closed and sent the same
    packet again on a fresh one, which the hop dropped as `replayed`, so the search
    failed `protocol_error` (which `route.search` does not retry elsewhere)."""
    nodes, phone = swarm
    home = nodes["home"]
    replayed = home.status()["search"]["dropped"].get("replayed", 0)

    async def body(host: HearthHost, roster: Roster) -> tuple[ErrorCode, int]:
        streams = HopStreams(host, route.SEARCH_PROTOCOL)
        working = [True]
        async with trio.open_nursery() as nursery:
            old = await serve_exit_that_fails(nodes["old"], home, nursery, working)
            known = await nodes_known(host, roster, home, 3)
            path = [known[home.peer_id], known[old.peer_id]]
            results, _ = await route.send(host, path, "sourdough", 5, streams)
            assert results and streams.kept() == 1
            working[0] = False
            with pytest.raises(HearthError) as failed:
                await route.send(host, path, "sourdough", 5, streams)
            await streams.aclose()
            nursery.cancel_scope.cancel()
        return failed.value.code, streams.opened

    assert as_phone(phone, home, body) == (ErrorCode.UNREACHABLE, 1)
    assert home.status()["search"]["dropped"].get("replayed", 0) == replayed
