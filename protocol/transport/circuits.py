"""Circuit addresses (`<relay addr>/p2p/<relay>/p2p-circuit/p2p/<dest>`) and dialling them."""

from __future__ import annotations

from libp2p.abc import IHost
from libp2p.relay.circuit_v2.config import RelayConfig, RelayRole
from libp2p.relay.circuit_v2.protocol import CircuitV2Protocol
from libp2p.relay.circuit_v2.transport import CircuitV2Transport

CIRCUIT = "/p2p-circuit"


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


def dialer(host: IHost) -> CircuitV2Transport:
    """A transport that dials through relays (it never reserves on its own)."""
    return CircuitV2Transport(host, CircuitV2Protocol(host), RelayConfig(roles=RelayRole.STOP))
