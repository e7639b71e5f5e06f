"""Reaching home through a relay friend, as a resident phone does: real hosts on
loopback (home, relay, phone in this process), a real TCP proxy in front of the relay
that can go silent, and the phone's `NodeLink`."""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
from libp2p.abc import INetStream
from libp2p.custom_types import TProtocol
from libp2p.io.trio import TrioTCPStream
from libp2p.peer.id import ID

from hearth.companion.audit import AuditLog
from hearth.companion.link import NodeLink
from hearth.protocol.transport import host as host_module
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.transport.circuits import circuit_addrs, is_circuit
from hearth.protocol.transport.health import HEALTH_PROTOCOL, ask_health
from hearth.protocol.transport.host import HearthHost, host_for_home
from hearth.protocol.transport.keys import create_identity, load_identity
from hearth.protocol.transport.membership import RosterHolder, found_swarm
from hearth.protocol.transport.probe import lay_out_homes
from hearth.protocol.transport.relay import CircuitRelay, Relaying
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import Health, HealthRequest
from hearth.protocol.wire.roster import Member, Role

pytestmark = pytest.mark.timeout(90)
LOOPBACK = ["/ip4/127.0.0.1/tcp/0"]
IDENTIFY = TProtocol("/ipfs/id/1.0.0")


def lay_out(tmp: Path) -> dict[str, Path]:
    """A founding home, a friend holding `relay` and a phone, all on its roster."""
    homes = {name: tmp / name for name in ("home", "relay", "phone")}
    found_swarm(homes["home"], "home")
    for name, role in (("relay", Role.RELAY), ("phone", Role.PHONE)):
        member = Member(
            peer_id=peer_id_of(create_identity(homes[name])), name=name, roles=frozenset({role})
        )
        RosterHolder(homes["home"]).add(member)
    for name in ("relay", "phone"):
        for file in ("roster.signed", "founder", "swarm.key"):
            shutil.copy2(homes["home"] / file, homes[name] / file)  # modes kept (0600)
    return homes


def serve_health(host: HearthHost, addrs: list[str] | None = None) -> None:
    """Health answers, telling `addrs` (as they are when asked) as the home's addresses."""

    async def health(stream: FrameStream) -> None:
        if isinstance(await stream.receive(), HealthRequest):
            await stream.send(Health(peer_id=host.peer_id, name="home", addrs=addrs or []))

    host.handle(HEALTH_PROTOCOL, health)


class SilenceableProxy:
    """TCP to `port`; `silence()` makes every connection made so far go quiet (bytes
    dropped, sockets left open: a relay that vanished without a FIN), new ones pass."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.accepted = 0
        self._generation = 0

    def silence(self) -> None:
        self._generation += 1

    async def serve(self, task_status: trio.TaskStatus[int]) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._pipe_both, listeners)

    async def _pipe_both(self, client: trio.SocketStream) -> None:
        self.accepted += 1
        born = self._generation
        async with await trio.open_tcp_stream("127.0.0.1", self.port) as server:

            async def pipe(src: trio.SocketStream, dst: trio.SocketStream) -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    while data := await src.receive_some(65536):
                        if self._generation == born:
                            await dst.send_all(data)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pipe, client, server)
                nursery.start_soon(pipe, server, client)


@contextlib.asynccontextmanager
async def relayed_home(
    tmp: Path, advertise: bool = False
) -> AsyncIterator[tuple[dict[str, Path], HearthHost, str]]:
    """Home and relay running, the home's slot reserved; yields the homes, the relay
    host and the circuit address to the home (with `advertise`, the home's health
    answer tells its addresses, the circuit included)."""
    homes = lay_out(tmp)
    home, relay = host_for_home(homes["home"]).host, host_for_home(homes["relay"]).host
    advertised: list[str] = []
    serve_health(home, advertised)
    async with (
        home.run(LOOPBACK),
        relay.run(LOOPBACK),
        Relaying(relay, relay.admit).run(),
        Relaying(home, lambda peer: False).run() as reserving,
    ):
        circuits = await reserving.reserve(relay.peer_id, relay.addrs())
        if advertise:
            advertised += home.addrs() + circuits
        yield homes, relay, circuits[0]


def relay_connections(host: HearthHost, relay: str) -> list[object]:
    return list(host.host.get_network().get_connections(ID.from_base58(relay)))


def test_no_identify_stream_is_opened_on_connect(tmp_path: Path) -> None:
    """Identify both ways on every connection was ~40% of a relayed connect's CPU;
    Hearth reads nothing it learns."""
    trio.run(no_identify, tmp_path)


async def no_identify(tmp_path: Path) -> None:
    homes = lay_out_homes(tmp_path)
    node, phone = host_for_home(homes["node"]).host, host_for_home(homes["phone"]).host
    asked: list[str] = []

    async def identify(stream: INetStream) -> None:
        asked.append(str(stream.muxed_conn.peer_id))
        await stream.reset()

    serve_health(node)
    node.host.set_stream_handler(IDENTIFY, identify)
    async with node.run(LOOPBACK), phone.run([]):
        await phone.connect(node.peer_id, node.addrs())
        stream = await phone.open(node.peer_id, HEALTH_PROTOCOL)
        await stream.send(HealthRequest())
        assert isinstance(await stream.receive(), Health)
        await trio.sleep(0.5)  # py-libp2p would have identified by now (background task)
    assert asked == []


def test_the_link_keeps_the_relay_connection_across_home_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    trio.run(relay_kept, tmp_path)


async def relay_kept(tmp_path: Path) -> None:
    async with relayed_home(tmp_path) as (homes, relay, circuit):
        home_id = RosterHolder(homes["phone"]).roster.founder
        AddressBook(homes["phone"]).remember(home_id, [circuit])
        async with NodeLink.running(homes["phone"], AuditLog(homes["phone"] / "a.log")) as link:
            kept = None
            for _ in range(3):
                assert await link.ensure(), link.reason
                assert link.host.worked[home_id] == circuit
                (conn,) = relay_connections(link.host, relay.peer_id)
                assert kept is None or conn is kept  # one dial to the relay, ever
                kept = conn
                await link.host.disconnect(home_id)  # the home link drops
                assert link.host.connected(relay.peer_id)


def test_the_link_dials_the_relay_ahead_while_the_home_is_direct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the direct path goes, the relayed reconnect finds its relay connection
    already up (before: the relay was dialled only once the home was lost)."""
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    trio.run(relay_ahead, tmp_path)


async def relay_ahead(tmp_path: Path) -> None:
    async with relayed_home(tmp_path, advertise=True) as (homes, relay, circuit):
        home_id = RosterHolder(homes["phone"]).roster.founder
        probe = host_for_home(homes["phone"]).host
        async with probe.run([]):  # the home's own addresses, from its health answer
            told = (await ask_health(probe, home_id, [circuit], timeout=30)).addrs
        AddressBook(homes["phone"]).remember(home_id, [a for a in told if not is_circuit(a)])
        async with NodeLink.running(homes["phone"], AuditLog(homes["phone"] / "a.log")) as link:
            assert await link.ensure(), link.reason
            assert not is_circuit(link.host.worked[home_id])  # home reached directly
            (ahead,) = relay_connections(link.host, relay.peer_id)
            await link.host.disconnect(home_id)
            with trio.fail_after(20):
                await link.host.connect(home_id, [circuit])
            assert link.host.worked[home_id] == circuit
            assert relay_connections(link.host, relay.peer_id) == [ahead]  # not dialled again


def test_a_relay_connection_gone_silent_is_dialled_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept connection to the relay dies without a FIN: the link notices the home
    is silent, the next dial over the dead connection fails and drops it, and the one
    after reaches home through a fresh connection (before: every reconnect reused the
    dead connection and timed out, until TCP gave up minutes later)."""
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    trio.run(relay_silenced, tmp_path)


async def relay_silenced(tmp_path: Path) -> None:
    async with relayed_home(tmp_path) as (homes, _, circuit), trio.open_nursery() as nursery:
        relay_port = int(circuit.split("/tcp/")[1].split("/")[0])
        proxy = SilenceableProxy(relay_port)
        port = await nursery.start(proxy.serve)
        proxied = circuit.replace(f"/tcp/{relay_port}/", f"/tcp/{port}/", 1)
        home_id = RosterHolder(homes["phone"]).roster.founder
        AddressBook(homes["phone"]).remember(home_id, [proxied])
        async with NodeLink.running(homes["phone"], AuditLog(homes["phone"] / "a.log")) as link:
            nursery.start_soon(link.keep)
            with trio.fail_after(15):
                await link.wait_up()
            assert proxy.accepted == 1
            proxy.silence()
            with trio.fail_after(15):
                while link.connected:
                    await trio.sleep(0.1)
            with trio.fail_after(30):
                await link.wait_up()
            assert link.host.worked[home_id] == proxied
            assert proxy.accepted == 2
        nursery.cancel_scope.cancel()


def test_a_circuit_that_worked_last_is_not_held_back_behind_direct_addresses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Away from home the home's LAN address swallows the dial; with the circuit first
    in the address list (it worked last) the relay is dialled at once, not after the
    direct head start (made 60 s here, so waiting it out would break the bound)."""
    monkeypatch.setattr(host_module, "RELAY_HEAD_START_S", 60.0)
    trio.run(circuit_first, tmp_path)


async def circuit_first(tmp_path: Path) -> None:
    async with relayed_home(tmp_path) as (homes, _, circuit), trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        held: list[trio.SocketStream] = []

        async def swallow(stream: trio.SocketStream) -> None:
            held.append(stream)  # accepted, never answered
            await trio.sleep_forever()

        nursery.start_soon(trio.serve_listeners, swallow, listeners)
        home_id = RosterHolder(homes["phone"]).roster.founder
        lan = f"/ip4/127.0.0.1/tcp/{listeners[0].socket.getsockname()[1]}/p2p/{home_id}"
        phone = host_for_home(homes["phone"]).host
        async with phone.run([]):
            with trio.fail_after(20):
                await phone.connect(home_id, [circuit, lan], timeout=60)
            assert phone.worked[home_id] == circuit
        nursery.cancel_scope.cancel()


class PhoneSockets:
    """The phone's TCP sockets (those opened while `watching`): the order of its
    writes and of its reads that returned data."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[str] = []
        self._mine: contextvars.ContextVar[bool] = contextvars.ContextVar("mine", default=False)
        init, read, write = TrioTCPStream.__init__, TrioTCPStream.read, TrioTCPStream.write
        sockets = self

        def tagged_init(stream: TrioTCPStream, *args: object) -> None:
            init(stream, *args)  # type: ignore[arg-type]
            stream.phone = sockets._mine.get()  # type: ignore[attr-defined]

        async def logged_read(stream: TrioTCPStream, n: int | None = None) -> bytes:
            data = await read(stream, n)
            if data and getattr(stream, "phone", False):
                sockets.log.append("read")
            return data

        async def logged_write(stream: TrioTCPStream, data: bytes) -> None:
            if getattr(stream, "phone", False):
                sockets.log.append("write")
            await write(stream, data)

        monkeypatch.setattr(TrioTCPStream, "__init__", tagged_init)
        monkeypatch.setattr(TrioTCPStream, "read", logged_read)
        monkeypatch.setattr(TrioTCPStream, "write", logged_write)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        token = self._mine.set(True)
        try:
            yield
        finally:
            self._mine.reset(token)

    def waits(self) -> int:
        """How often the phone read after writing: its round trips, at most."""
        return sum(1 for pair in itertools.pairwise(self.log) if pair == ("write", "read"))


def test_a_relayed_reconnect_takes_few_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a kept relay connection, reaching home again and a first exchange: HOP
    CONNECT, Noise's first message, Yamux and the first request each go with their
    protocol's proposal (optimistic multistream-select), and the circuit's streams
    send no WINDOW_UPDATE per read. Counted on the phone's socket: 4-5 switches from
    writing to reading (24-29 before), its writes 8 (42-49 before)."""
    sockets = PhoneSockets(monkeypatch)
    counts = trio.run(relayed_reconnect, tmp_path, sockets)
    assert max(waits for waits, _ in counts) <= 8
    assert max(writes for _, writes in counts) <= 14


async def relayed_reconnect(tmp_path: Path, sockets: PhoneSockets) -> list[tuple[int, int]]:
    counts = []
    async with relayed_home(tmp_path) as (homes, relay, circuit):
        home_id = RosterHolder(homes["phone"]).roster.founder
        phone = host_for_home(homes["phone"]).host
        async with phone.run([]):
            with sockets.watching():
                await ask_health(phone, home_id, [circuit], timeout=30)
            for _ in range(3):
                await ask_again(phone, home_id, circuit, sockets)
                assert phone.connected(relay.peer_id)
                counts.append((sockets.waits(), sockets.log.count("write")))
    return counts


async def ask_again(phone: HearthHost, home_id: str, circuit: str, sockets: PhoneSockets) -> None:
    """Drop the phone's connection to the home (the relay's stays) and ask again through
    the circuit, the phone's sockets watched from a clear log."""
    await phone.disconnect(home_id)
    await trio.sleep(0.2)
    sockets.log.clear()
    with sockets.watching():
        await ask_health(phone, home_id, [circuit], timeout=30)


class RelayedChunks:
    """What the relay forwards through its circuits: one entry per read that returned
    data, by the peer it came from (a relayed chunk is one such read and its write on)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sources: list[str] = []
        read = CircuitRelay._read_stream_with_retry

        async def counted(relay: CircuitRelay, stream: INetStream, *args: object) -> bytes | None:
            data = await read(relay, stream, *args)
            if data:
                self.sources.append(str(stream.muxed_conn.peer_id))
            return data

        monkeypatch.setattr(CircuitRelay, "_read_stream_with_retry", counted)

    def of(self, peer: str) -> int:
        return self.sources.count(peer)


def test_the_handshake_inside_a_circuit_leaves_with_hop_connect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The phone does not wait for the relay's answer to HOP CONNECT before its first
    Noise message: they leave in one write, the relay holds the message until the
    home has taken the circuit, and the STATUS is checked ahead of the home's answer.
    A relayed connect so waits one round trip through relay and home fewer: counted on
    the phone's socket, at best 3 switches from writing to reading over a kept relay
    connection (4 before) and 5 with a fresh phone host (6 before)."""
    kept, cold, _ = trio.run(
        relayed_rounds, tmp_path, PhoneSockets(monkeypatch), RelayedChunks(monkeypatch)
    )
    assert min(kept) <= 3, kept
    assert min(cold) <= 5, cold


async def relayed_rounds(
    tmp_path: Path, sockets: PhoneSockets, chunks: RelayedChunks
) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """Connects with a fresh phone host, then twice over its kept relay connection: the
    phone's round trips of each (kept, cold), and the chunks the relay forwarded from
    the phone and from the home on each cold one."""
    kept, cold, relayed = [], [], []
    async with relayed_home(tmp_path) as (homes, _, circuit):
        home_id = RosterHolder(homes["phone"]).roster.founder
        for _ in range(4):
            phone = host_for_home(homes["phone"]).host
            async with phone.run([]):
                sockets.log.clear()
                chunks.sources.clear()
                with sockets.watching():
                    await ask_health(phone, home_id, [circuit], timeout=30)
                cold.append(sockets.waits())
                relayed.append((chunks.of(phone.peer_id), chunks.of(home_id)))
                for _ in range(2):
                    await ask_again(phone, home_id, circuit, sockets)
                    kept.append(sockets.waits())
    return kept, cold, relayed


def test_a_relay_that_refuses_the_circuit_is_reported_with_the_home_unreachable(
    tmp_path: Path,
) -> None:
    """The relay answers HOP CONNECT for a home holding no reservation with a refusal:
    the phone's first read through the circuit fails on it, and the dial says the relay
    holds no reservation (`unreachable`), not a broken handshake."""
    trio.run(relay_without_reservation, tmp_path)


async def relay_without_reservation(tmp_path: Path) -> None:
    homes = lay_out(tmp_path)
    home, relay = host_for_home(homes["home"]).host, host_for_home(homes["relay"]).host
    async with home.run(LOOPBACK), relay.run(LOOPBACK), Relaying(relay, relay.admit).run():
        (circuit, *_) = circuit_addrs(relay.addrs(), relay.peer_id, home.peer_id)
        phone = host_for_home(homes["phone"]).host
        async with phone.run([]):
            with pytest.raises(HearthError) as refused:
                await ask_health(phone, home.peer_id, [circuit], timeout=30)
    assert refused.value.code is ErrorCode.UNREACHABLE
    assert "holds no reservation" in refused.value.message


def test_a_relay_whose_gate_refuses_the_phone_is_reported_refused(tmp_path: Path) -> None:
    """The relay closes the phone's connection right after Noise: the phone's muxer
    proposal (sent optimistically) is never answered, and the dial says `refused` and
    names the relay, not a broken pipe."""
    trio.run(relay_refuses, tmp_path)


async def relay_refuses(tmp_path: Path) -> None:
    homes = lay_out(tmp_path)
    phone_id = peer_id_of(load_identity(homes["phone"]))
    home = host_for_home(homes["home"]).host
    held = host_for_home(homes["relay"])
    relay = HearthHost(
        held.identity,
        lambda: held.keys.accepted(time.time()),
        lambda peer: peer != phone_id and held.roster.admits(peer),
    )
    async with (
        home.run(LOOPBACK),
        relay.run(LOOPBACK),
        Relaying(relay, relay.admit).run(),
        Relaying(home, lambda peer: False).run() as reserving,
    ):
        (circuit, *_) = await reserving.reserve(relay.peer_id, relay.addrs())
        phone = host_for_home(homes["phone"]).host
        async with phone.run([]):
            with pytest.raises(HearthError) as refused:
                await ask_health(phone, home.peer_id, [circuit], timeout=30)
    assert refused.value.code is ErrorCode.REFUSED
    assert relay.peer_id in refused.value.message


def test_a_link_to_a_home_whose_gate_refuses_it_is_down_and_says_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dial itself succeeds (the muxer is proposed optimistically), the home's gate
    closes the connection right after Noise: the link is not up, and says `refused`."""
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    trio.run(home_refuses, tmp_path)


async def home_refuses(tmp_path: Path) -> None:
    homes = lay_out(tmp_path)
    phone_id = peer_id_of(load_identity(homes["phone"]))
    held = host_for_home(homes["home"])
    home = HearthHost(
        held.identity,
        lambda: held.keys.accepted(time.time()),
        lambda peer: peer != phone_id and held.roster.admits(peer),
    )
    async with home.run(LOOPBACK):
        AddressBook(homes["phone"]).remember(home.peer_id, home.addrs())
        async with NodeLink.running(homes["phone"], AuditLog(homes["phone"] / "a.log")) as link:
            assert not await link.ensure()
            assert link.error is not None and link.error.code is ErrorCode.REFUSED
            assert not link.connected


def test_a_relayed_connect_sends_back_to_back_writes_as_one_relayed_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a connection writes back to back leaves as one write once its process waits
    (`HeldWrites`). Inside the circuit: the phone's last Noise message, muxer proposal,
    stream opening and request (four relayed chunks before), the home's multistream
    answer with its Noise message (two), its stream's answer, frame and close (three).
    On the relay link: the HOP stream's opening with its CONNECT, the relay's answers.
    Counted at the relay and on the phone's socket, at best over a few connects (a
    process that stays busy sends what it holds after `HOLD_S`): 2-3 chunks from the
    phone and 2-3 from the home on a connect with a fresh phone host (6 and 7-8 before).
    The phone's link to the relay is a direct pnet link, which writes as it goes: its
    socket's rounds are those `test_a_relayed_reconnect_takes_few_round_trips` counts."""
    _, _, chunks = trio.run(
        relayed_rounds, tmp_path, PhoneSockets(monkeypatch), RelayedChunks(monkeypatch)
    )
    assert min(phone for phone, _ in chunks) <= 3, chunks
    assert min(home for _, home in chunks) <= 3, chunks


def test_what_a_phone_writes_just_before_its_host_stops_reaches_the_home(
    tmp_path: Path,
) -> None:
    """A request and the stream's close, written as the phone's host stops (its trio
    run ending with it, as a process's would), still reach the home: writes held to
    leave together are sent as the host stops, not dropped with its tasks."""
    trio.run(last_words, tmp_path)


async def last_words(tmp_path: Path) -> None:
    homes = lay_out(tmp_path)
    home = host_for_home(homes["home"]).host
    heard: list[object] = []
    ended = trio.Event()

    async def listen(stream: FrameStream) -> None:
        heard.append(await stream.receive())
        with contextlib.suppress(HearthError):
            heard.append(await stream.receive())
        ended.set()

    home.handle(HEALTH_PROTOCOL, listen)

    def phone_run() -> None:
        async def phone_main() -> None:
            phone = host_for_home(homes["phone"]).host
            async with phone.run([]):
                stream = await phone.open(home.peer_id, HEALTH_PROTOCOL, home.addrs())
                await stream.send(HealthRequest())
                await stream.close()

        trio.run(phone_main)

    async with home.run(LOOPBACK):
        await trio.to_thread.run_sync(phone_run)
        with trio.fail_after(20):
            await ended.wait()
    assert heard == [HealthRequest()]
