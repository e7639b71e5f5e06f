"""Circuit addresses (`<relay addr>/p2p/<relay>/p2p-circuit/p2p/<dest>`) and dialling them."""

from __future__ import annotations

from libp2p.abc import IHost
from libp2p.connection_types import ConnectionType
from libp2p.io.exceptions import IOException
from libp2p.network.connection.raw_connection import RawConnection
from libp2p.peer.id import ID
from libp2p.relay.circuit_v2.pb.circuit_pb2 import HopMessage, PeerId
from libp2p.relay.circuit_v2.protocol import PROTOCOL_ID as HOP_PROTOCOL
from libp2p.relay.circuit_v2.protocol_buffer import StatusCode
from libp2p.utils.varint import decode_varint_with_size, encode_varint_prefixed
from multiaddr import Multiaddr

from .pnet import READ_AHEAD, StampedConn

CIRCUIT = "/p2p-circuit"
MAX_STATUS = 64 * 1024  # the most a relay's answer to HOP CONNECT may take (py-libp2p's cap)


def is_circuit(addr: str) -> bool:
    return CIRCUIT in addr


def circuit_addrs(relay_addrs: list[str], relay: str, dest: str) -> list[str]:
    """`<relay addr>/p2p/<relay>/p2p-circuit/p2p/<dest>` for each of the relay's addresses."""
    out = []
    for addr in relay_addrs:
        if is_circuit(addr):
            continue
        base = addr.split("/p2p/")[0]
        out.append(f"{base}/p2p/{relay}{CIRCUIT}/p2p/{dest}")
    return out


def relay_of(circuit: str) -> tuple[str, str]:
    """(relay peer id, relay address with its /p2p part) of a circuit address."""
    relay_addr = circuit.split(CIRCUIT)[0]
    return relay_addr.split("/p2p/")[1], relay_addr


class RelayRefused(IOException):
    """The relay answered HOP CONNECT with a status other than OK."""


class CircuitConn(StampedConn):
    """A connection to a peer through a relay whose HOP CONNECT is not yet answered.

    The CONNECT goes with the first write through the circuit (Noise's first message
    and its proposal), and the relay's STATUS is read and checked ahead of the first
    read's data: the relay holds what follows the CONNECT until the destination has
    accepted, so the handshake inside the circuit starts a round trip through relay
    and destination earlier than after the STATUS (as go-libp2p's relay client would
    wait for it). A refusal is the first read's error (`RelayRefused`)."""

    def __init__(self, conn: RawConnection, connect: bytes) -> None:
        super().__init__(conn)
        self._connect = connect  # not yet written
        self._answered = False

    async def write(self, data: bytes) -> None:
        data, self._connect = self._connect + data, b""
        await super().write(data)

    async def read(self, n: int | None = None) -> bytes:
        if not self._answered:
            if self._connect:
                await self.write(b"")
            await self._read_status()
        return await super().read(n)

    async def _read_status(self) -> None:
        arrived = b""
        while True:
            length, size = decode_varint_with_size(arrived[:10])
            if size and arrived[size - 1] < 0x80 and len(arrived) >= size + length:
                break
            if len(arrived) > MAX_STATUS:
                raise RelayRefused("the relay's answer to CONNECT is too long")
            data = await self._conn.read(READ_AHEAD)
            if not data:
                raise RelayRefused("the relay closed the circuit before answering CONNECT")
            arrived += data
        answer = HopMessage()
        answer.ParseFromString(arrived[size : size + length])
        status = StatusCode(answer.status) if answer.HasField("status") else StatusCode.OK
        if answer.type != HopMessage.STATUS or status != StatusCode.OK:
            raise RelayRefused(f"relay refused the circuit: status code {status.name}")
        self._answered = True
        self._pending, self._at = arrived[size + length :], 0


async def open_circuit(host: IHost, relay: ID, dest: ID) -> CircuitConn:
    """A connection to `dest` through `relay` (a connection to it is opened if none is
    up): a HOP stream, its CONNECT sent with the first write (see `CircuitConn`)."""
    stream = await host.new_stream(relay, [HOP_PROTOCOL])
    connect = HopMessage(type=HopMessage.CONNECT, peer=PeerId(id=dest.to_bytes()))
    raw = RawConnection(
        stream=stream,
        initiator=True,
        connection_type=ConnectionType.RELAYED,
        addresses=[Multiaddr(f"/p2p/{relay}{CIRCUIT}/p2p/{dest}")],
    )
    return CircuitConn(raw, encode_varint_prefixed(connect.SerializeToString()))
