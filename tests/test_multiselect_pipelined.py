"""`PipelinedSelect` against py-libp2p's own multistream listener over real loopback TCP:
the greeting and the first proposal leave in one write, before anything is read; a
single protocol is proposed optimistically, with the first message. `PipelinedListener`
against it and against py-libp2p's own dialer: the greeting goes with the answer when
the proposal came with the greeting."""

from __future__ import annotations

import secrets
from functools import partial

import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from libp2p.custom_types import TProtocol
from libp2p.io.exceptions import IOException, MessageTooLarge
from libp2p.io.trio import TrioTCPStream
from libp2p.protocol_muxer.exceptions import MultiselectClientError
from libp2p.protocol_muxer.multiselect import Multiselect
from libp2p.protocol_muxer.multiselect_client import MultiselectClient
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
from libp2p.utils import encode_delim
from libp2p.utils.varint import encode_uvarint

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.multiselect import NotServed, PipelinedListener, PipelinedSelect
from hearth.protocol.transport.probe import HEALTH_PROTOCOL
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import HealthRequest

pytestmark = pytest.mark.timeout(60)
ECHO, CHAT = TProtocol("/test/echo/1"), TProtocol("/test/chat/1")
HELLO = b"hello"


class Recorded(TrioTCPStream):
    """One side of the socket, keeping the order of its writes and reads."""

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream)
        self.log: list[tuple[str, bytes]] = []

    async def write(self, data: bytes) -> None:
        self.log.append(("write", data))
        await super().write(data)

    async def read(self, n: int | None = None) -> bytes:
        data = await super().read(n)
        self.log.append(("read", data))
        return data


async def select(
    served: list[TProtocol],
    asked: list[TProtocol],
    talk: bool = False,
    listener_class: type[Multiselect] = Multiselect,
    client: MultiselectClient | None = None,
) -> tuple[object, Recorded]:
    """What the listener serving `served` and the dialer asking `asked` agree on; with
    `talk`, the dialer then sends `HELLO` and reads the listener's answer to it (the
    listener echoes it in upper case). The listener is a `listener_class`, the dialer
    `client` (a `PipelinedSelect` unless given); their sockets are `LISTENED` and the
    returned one."""

    async def handler(stream: object) -> None:
        pass

    listener = listener_class({protocol: handler for protocol in served})
    agreed: list[object] = []

    async def listen(stream: trio.SocketStream) -> None:
        with trio.move_on_after(10):
            try:
                raw = Recorded(stream)
                LISTENED[:] = [raw]
                protocol, _ = await listener.negotiate(MultiselectCommunicator(raw))
                agreed.append(protocol)
                if talk:
                    await raw.write((await raw.read(len(HELLO))).upper())
            except Exception as exc:  # what the listener made of it, for the test to see
                agreed.append(exc)

    async with trio.open_nursery() as nursery:
        serve = partial(trio.serve_tcp, host="127.0.0.1")
        (socket_listener,) = await nursery.start(serve, listen, 0)
        dialer = Recorded(await trio.testing.open_stream_to_socket_listener(socket_listener))
        try:
            with trio.fail_after(10):
                chosen: object = await (client or PipelinedSelect()).select_one_of(
                    asked, MultiselectCommunicator(dialer)
                )
                if talk:
                    await dialer.write(HELLO)
                    chosen = (chosen, await dialer.read(len(HELLO)))
        except (MultiselectClientError, NotServed) as exc:
            chosen = exc
        await dialer.close()  # a listener still waiting for a proposal sees the end
        with trio.fail_after(10):
            while not agreed:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    if not isinstance(chosen, Exception):
        assert agreed == [chosen[0] if talk else chosen]  # type: ignore[index]
    return chosen, dialer


LISTENED: list[Recorded] = []


def test_greeting_and_proposal_go_in_one_write() -> None:
    chosen, dialer = trio.run(select, [ECHO], [ECHO, CHAT])
    assert chosen == ECHO
    kind, first = dialer.log[0]
    assert kind == "write" and b"/multistream/1.0.0\n" in first and ECHO.encode() in first
    assert [k for k, _ in dialer.log].count("write") == 1  # no second round trip


def test_a_single_protocol_goes_with_the_first_message() -> None:
    """Nothing is sent or read until the first message, which carries the greeting and
    the proposal; the first read returns the listener's answer to it, the negotiation's
    answers checked and taken away."""
    (chosen, answer), dialer = trio.run(partial(select, talk=True), [ECHO], [ECHO])
    assert chosen == ECHO and answer == HELLO.upper()
    kind, first = dialer.log[0]
    assert kind == "write" and first.startswith(b"\x13/multistream/1.0.0\n")
    assert first.endswith(ECHO.encode() + b"\n" + HELLO)
    assert [k for k, _ in dialer.log].count("write") == 1  # one write, then the answers


def test_a_single_protocol_refused_fails_the_first_read() -> None:
    chosen, _ = trio.run(partial(select, talk=True), [CHAT], [ECHO])
    assert isinstance(chosen, NotServed)
    assert "not supported" in str(chosen)


def test_a_later_proposal_is_tried_when_the_first_is_refused() -> None:
    chosen, _ = trio.run(select, [CHAT], [ECHO, CHAT])
    assert chosen == CHAT


def test_nothing_served_is_an_error_that_says_so() -> None:
    chosen, _ = trio.run(select, [CHAT], [ECHO, TProtocol("/test/other/1")])
    assert isinstance(chosen, MultiselectClientError)
    assert "not supported" in str(chosen)


def test_a_refusal_the_listener_follows_with_a_reset_reads_as_a_refusal() -> None:
    """Real hosts (pnet, Noise, Yamux) on loopback; the node does not serve health. Its
    listener answers "na", then reads the request as a next proposal and resets the
    stream. The dialer reads only once the reset has arrived: before, Yamux failed the
    counted read on the reset though the "na" was buffered ahead of it, and the home
    status said "went away (StreamReset)", not `protocol_error`."""
    keys = [Ed25519PrivateKey.generate() for _ in range(2)]
    ids = {peer_id_of(k) for k in keys}
    swarm_key = secrets.token_bytes(32)
    node = HearthHost(keys[0], lambda: [swarm_key], ids.__contains__)
    node.handle(TProtocol("/test/other/1"), lambda stream: trio.sleep(0))

    async def scenario() -> tuple[bool, ErrorCode]:
        async with node.run(["/ip4/127.0.0.1/tcp/0"]):
            dialer = HearthHost(keys[1], lambda: [swarm_key], ids.__contains__)
            async with dialer.run(["/ip4/127.0.0.1/tcp/0"]):
                stream = await dialer.open(node.peer_id, HEALTH_PROTOCOL, node.addrs())
                await stream.send(HealthRequest())
                muxed = stream.stream.muxed_stream
                with trio.fail_after(20):
                    while not muxed.reset_received:  # type: ignore[attr-defined]
                        await trio.sleep(0.01)
                with pytest.raises(HearthError) as refused:
                    await stream.receive()
                return muxed.reset_received, refused.value.code  # type: ignore[attr-defined]

    assert trio.run(scenario) == (True, ErrorCode.PROTOCOL_ERROR)


def test_the_listener_answers_greeting_and_proposal_in_one_write() -> None:
    """The optimistic dialer's greeting, proposal and first message arrive together: the
    listener's greeting and answer leave in one write (py-libp2p's: two, one Noise
    message and one relayed chunk each), and the first message is left for the
    handler, which answers it."""
    (chosen, answer), _ = trio.run(
        partial(select, talk=True, listener_class=PipelinedListener), [ECHO], [ECHO]
    )
    assert chosen == ECHO and answer == HELLO.upper()
    writes = [data for kind, data in LISTENED[0].log if kind == "write"]
    assert writes == [b"\x13/multistream/1.0.0\n" + b"\x0d" + ECHO.encode() + b"\n", HELLO.upper()]


def test_the_listener_greets_first_a_dialer_that_waits_for_the_greeting() -> None:
    """py-libp2p's own dialer sends its proposal only once the greeting has come: the
    listener finds no proposal with the greeting and greets before it reads on."""
    chosen, _ = trio.run(
        partial(select, listener_class=PipelinedListener, client=MultiselectClient()),
        [ECHO],
        [ECHO],
    )
    assert chosen == ECHO
    writes = [data for kind, data in LISTENED[0].log if kind == "write"]
    assert writes == [b"\x13/multistream/1.0.0\n", b"\x0d" + ECHO.encode() + b"\n"]


def test_the_listener_refuses_then_accepts_a_later_proposal() -> None:
    chosen, _ = trio.run(partial(select, listener_class=PipelinedListener), [CHAT], [ECHO, CHAT])
    assert chosen == CHAT
    refused = partial(select, talk=True, listener_class=PipelinedListener)
    assert isinstance(trio.run(refused, [CHAT], [ECHO])[0], NotServed)


def test_an_answer_claiming_a_huge_length_fails_at_once() -> None:
    """A hostile listener claims a 1 GiB greeting and trickles bytes: the dialer's first
    read fails with a typed error at once, instead of buffering what the listener sends
    until the caller's deadline."""

    async def listen(stream: trio.SocketStream) -> None:
        await stream.send_all(encode_uvarint(1 << 30) + b"x" * 100)
        await trio.sleep(30)

    async def scenario() -> type[BaseException]:
        async with trio.open_nursery() as nursery:
            serve = partial(trio.serve_tcp, host="127.0.0.1")
            (socket_listener,) = await nursery.start(serve, listen, 0)
            dialer = TrioTCPStream(
                await trio.testing.open_stream_to_socket_listener(socket_listener)
            )
            await PipelinedSelect().select_one_of([ECHO], MultiselectCommunicator(dialer))
            await dialer.write(HELLO)
            with trio.fail_after(10), pytest.raises(IOException) as failed:
                await dialer.read(len(HELLO))
            await dialer.close()
            nursery.cancel_scope.cancel()
        return failed.type

    assert trio.run(scenario) is MessageTooLarge


def test_a_proposal_claiming_a_huge_length_is_refused_at_once() -> None:
    """The listener's side: a dialer claims a 1 GiB proposal and trickles bytes; the
    listener fails the negotiation at once instead of buffering until its timeout."""
    listener = PipelinedListener({ECHO: lambda stream: trio.sleep(0)})
    failed: list[BaseException] = []

    async def listen(stream: trio.SocketStream) -> None:
        try:
            await listener.negotiate(MultiselectCommunicator(TrioTCPStream(stream)))
        except Exception as exc:  # what the listener made of it, for the test to see
            failed.append(exc)

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            serve = partial(trio.serve_tcp, host="127.0.0.1")
            (socket_listener,) = await nursery.start(serve, listen, 0)
            dialer = await trio.testing.open_stream_to_socket_listener(socket_listener)
            greeting = encode_delim(b"/multistream/1.0.0")
            await dialer.send_all(greeting + encode_uvarint(1 << 30) + b"x" * 100)
            with trio.fail_after(10):
                while not failed:
                    await trio.sleep(0.01)
            await dialer.aclose()
            nursery.cancel_scope.cancel()

    trio.run(scenario)
    assert isinstance(failed[0].__cause__, MessageTooLarge), failed
