"""Search streams kept open between hops, across real processes on loopback: a home
(search relay), an FTS5 exit, an older-style exit that answers one packet per stream
(in the test process), and a phone that sends searches itself."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from hearth.companion.swarmkit import Processes, RunningNode, pair_in_process, start_node
from hearth.protocol.transport.host import HearthHost, host_for_home
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import (
    OnionKeys,
    OnionKeysRequest,
    SearchPacket,
    SearchReply,
)
from hearth.protocol.wire.roster import Roster
from hearth.search import route
from hearth.search.hopstreams import HopStreams
from hearth.search.index import INDEX_FILE, FtsIndex
from hearth.search.onion import Directory, EpochKeys, OnionAnnouncement, announce
from hearth.search.packets import build, seal_reply

from .nodes import cli, wait_until
from .test_swarm import subprocess_join

pytestmark = pytest.mark.timeout(240)


def node_json(*args: str) -> Any:
    import json

    return json.loads(cli("hearth-node", *args, "--json").stdout)


@pytest.fixture(scope="module")
def swarm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Path]]:
    """home (search relay), exit (FTS5, a daemon), old (search exit, no daemon: the
    tests serve it in process the way nodes did before streams were kept), a phone."""
    tmp = tmp_path_factory.mktemp("search-streams")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "bread.md").write_text("# Sourdough\nBake bread with a starter and a kettle.")
    with Processes() as processes:
        home = start_node(processes, tmp / "home")
        node_json("roster", "grant", home.peer_id, "search-relay", "--home", str(home.home))
        nodes: dict[str, Any] = {"home": home}
        for name in ("exit", "old"):
            subprocess_join(tmp / name, home.invite("--role", "friend", "--grant", "search-exit"))
            node_json("index", "add", str(docs), "--home", str(tmp / name))
        (tmp / "exit" / "config.toml").write_text("search_exit_per_minute = 100000\n")
        nodes["exit"] = start_node(processes, tmp / "exit")
        nodes["old"] = tmp / "old"
        pair_in_process(tmp / "phone", home.invite())
        wait_until(lambda: len(home.status()["search"]["known_nodes"]) == 2, "the exit's key")
        yield nodes, tmp / "phone"


async def serve_old_exit(
    old: Path, home: RunningNode, nursery: trio.Nursery, working: list[bool] | None = None
) -> HearthHost:
    """A search exit as nodes were before streams were kept: one packet per stream,
    then the stream is closed; with `working`, once `working[0]` is false it resets
    every stream instead (its backend broke, say). Its onion key is pushed to the home
    (the founder)."""
    host, _, _, identity = host_for_home(old)
    keys, index = EpochKeys(time.time()), FtsIndex(old / INDEX_FILE)

    async def serve(stream: FrameStream) -> None:
        packet = await stream.receive()
        assert isinstance(packet, SearchPacket)
        if working is not None and not working[0]:
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


async def _run_host(host: HearthHost, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    async with host.run(["/ip4/127.0.0.1/tcp/0"]):
        task_status.started()
        await trio.sleep_forever()


def as_phone(
    phone: Path, home: RunningNode, body: Callable[..., Awaitable[Any]], *extra: Any
) -> Any:
    async def go() -> Any:
        host, roster, _, _ = host_for_home(phone)
        async with host.run([]):
            return await body(host, roster.roster, *extra)

    return trio.run(go)


async def nodes_known(
    host: HearthHost, roster: Roster, home: RunningNode, count: int
) -> dict[str, OnionAnnouncement]:
    directory = Directory()
    for _ in range(40):
        await route.pull_directory(host, home.peer_id, directory, roster, home.addrs)
        if len(usable := directory.usable(roster, time.time())) >= count:
            return usable
        await trio.sleep(0.25)
    raise AssertionError("the home never listed the search nodes")


def opened_by(node: RunningNode) -> int:
    return int(node.status()["search"]["next_hop_streams"]["opened"])


def test_searches_over_kept_streams_open_no_stream_on_a_warm_path(swarm) -> None:
    nodes, phone = swarm
    home, exit_node = nodes["home"], nodes["exit"]
    before = opened_by(home)

    async def body(host: HearthHost, roster: Roster) -> tuple[int, int]:
        known = await nodes_known(host, roster, home, 2)
        path = [known[home.peer_id], known[exit_node.peer_id]]
        streams = HopStreams(host, route.SEARCH_PROTOCOL, idle_s=2.0)
        for _ in range(6):
            results, _ = await route.send(host, path, "sourdough kettle", 5, streams)
            assert results[0].title == "Sourdough"
        warm = streams.opened
        await trio.sleep(2.5)  # idle past idle_s: the kept stream is closed, a new one opened
        results, _ = await route.send(host, path, "sourdough", 5, streams)
        assert results and streams.kept() == 1
        await streams.aclose()
        assert streams.kept() == 0
        return warm, streams.opened

    warm, after_idle = as_phone(phone, home, body)
    assert (warm, after_idle) == (1, 2)
    assert opened_by(home) - before == 1  # seven packets relayed on one stream to the exit
    assert home.status()["search"]["served"]["relayed"] >= 7


def test_a_search_cancelled_mid_flight_drops_its_stream_and_the_next_gets_its_own_reply(
    swarm,
) -> None:
    nodes, phone = swarm
    home, exit_node = nodes["home"], nodes["exit"]

    async def body(host: HearthHost, roster: Roster) -> tuple[int, int, bool]:
        known = await nodes_known(host, roster, home, 2)
        path = [known[home.peer_id], known[exit_node.peer_id]]
        streams = HopStreams(host, route.SEARCH_PROTOCOL)
        await route.send(host, path, "sourdough", 5, streams)
        titles = []
        for delay in (0.0, 0.0005, 0.001):  # the packet is written whole, its reply still due
            with trio.move_on_after(delay) as cancelled:
                await route.send(host, path, "kettle", 5, streams)
            assert cancelled.cancelled_caught
            results, _ = await route.send(host, path, "starter", 5, streams)  # its own keys
            titles.append(results[0].title)
        kept = streams.kept()
        await streams.aclose()
        return streams.opened, kept, titles == ["Sourdough"] * 3

    assert as_phone(phone, home, body) == (4, 1, True)


def test_a_next_hop_that_closes_after_one_reply_still_works(swarm) -> None:
    nodes, phone = swarm
    home = nodes["home"]
    before = opened_by(home)

    async def body(host: HearthHost, roster: Roster) -> int:
        async with trio.open_nursery() as nursery:
            old = await serve_old_exit(nodes["old"], home, nursery)
            known = await nodes_known(host, roster, home, 3)
            path = [known[home.peer_id], known[old.peer_id]]
            streams = HopStreams(host, route.SEARCH_PROTOCOL)
            for i in range(4):
                results, _ = await route.send(host, path, "sourdough", 5, streams)
                assert results[0].title == "Sourdough", i
                await trio.sleep(0.1 * (i % 2))  # its close noticed when taken, or on use
            await streams.aclose()
            nursery.cancel_scope.cancel()
            return streams.opened

    assert as_phone(phone, home, body) == 1  # the home is a new node: one stream
    assert opened_by(home) - before == 4  # the old exit: a stream per packet, all answered


def test_a_peer_opening_too_many_streams_is_refused_busy_and_streams_stay_strict(swarm) -> None:
    from hearth.node.search import SERVE_PER_PEER

    nodes, phone = swarm
    home, exit_node = nodes["home"], nodes["exit"]
    before = home.status()["search"]["dropped"].get("too_many_streams", 0)

    async def body(host: HearthHost, roster: Roster) -> tuple[ErrorCode, ErrorCode]:
        held = [
            await host.open(home.peer_id, route.SEARCH_PROTOCOL, home.addrs)
            for _ in range(SERVE_PER_PEER)
        ]  # opened, the protocol proposed, no frame sent: each holds one of the peer's slots
        for stream in held:
            await stream.write(b"")  # the proposal, which would otherwise go with a frame
        extra = await host.open(home.peer_id, route.SEARCH_PROTOCOL, home.addrs)
        with pytest.raises(HearthError) as refused:
            await extra.receive()
        for stream in held:
            await stream.close()
        known = await nodes_known(host, roster, home, 2)
        path = [known[home.peer_id], known[exit_node.peer_id]]
        packet, _ = build("sourdough", [route.hop_of(a) for a in path], int(time.time()) + 60)
        stream = await host.open(home.peer_id, route.SEARCH_PROTOCOL, home.addrs)
        await stream.send(SearchPacket(data=packet))
        assert isinstance(await stream.receive(), SearchReply)
        await stream.send(OnionKeysRequest())  # only packets follow a packet
        with pytest.raises(HearthError) as strict:
            await stream.receive()
        return refused.value.code, strict.value.code

    assert as_phone(phone, home, body) == (ErrorCode.BUSY, ErrorCode.PROTOCOL_ERROR)
    assert home.status()["search"]["dropped"]["too_many_streams"] - before == 1
