"""Review of kept search streams (RV1), real node processes on loopback: a next hop's
error answer on a kept stream is an answer, not a stream the peer closed."""

from __future__ import annotations

import pytest
import trio

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.roster import Roster
from hearth.search import route
from hearth.search.hopstreams import HopStreams

from .test_search_streams import as_phone, nodes_known, serve_old_exit, swarm

__all__ = ["swarm"]  # the module fixture, shared
pytestmark = [pytest.mark.review, pytest.mark.timeout(240)]


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
            old = await serve_old_exit(nodes["old"], home, nursery, working)
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
