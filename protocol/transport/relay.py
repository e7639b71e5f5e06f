"""Circuit relay v2 inside the swarm: friends relay, homes reserve, phones dial through.

Every node runs the relay protocol: its STOP side accepts connections relayed to
it (the relayed connection is then upgraded with Noise and gated by the roster
like any other), and its HOP side relays for others only while `hop_allowed`
says so for the asking peer (the node holds the `relay` role, the peer is on the
roster). A home reserves a slot on each relay friend and hands the resulting
circuit addresses to its phones, which dial them when no direct address works.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio
from libp2p.abc import INetStream
from libp2p.network.stream.exceptions import StreamError
from libp2p.peer.id import ID
from libp2p.relay.circuit_v2.config import RelayConfig, RelayRole
from libp2p.relay.circuit_v2.protocol import PROTOCOL_ID as HOP_PROTOCOL
from libp2p.relay.circuit_v2.protocol import CircuitV2Protocol
from libp2p.relay.circuit_v2.transport import CircuitV2Transport
from libp2p.tools.anyio_service.context import background_trio_service

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .circuits import circuit_addrs, is_circuit
from .host import HearthHost

log = logging.getLogger("hearth.relay")
RESERVE_TIMEOUT_S = 5.0
READ_SIZE = 64 * 1024


class _Untracked(dict[Any, Any]):
    """Stores nothing: see `CircuitRelay`."""

    def __setitem__(self, key: object, value: object) -> None:
        pass


class CircuitRelay(CircuitV2Protocol):
    """py-libp2p's relay, with each circuit closing only its own streams.

    py-libp2p 0.8.1 files live circuits by destination peer id, and a circuit that
    ends closes whatever that entry holds: with two circuits to one home (two phones,
    or a phone reconnecting), the first to end cut the other. Here the table stays
    empty and each circuit closes its own two streams when either direction ends,
    at once (not after py-libp2p's read retries).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._active_relays = _Untracked()

    async def _read_stream_with_retry(self, stream: INetStream, *args: Any) -> bytes | None:
        # py-libp2p retries a half-closed stream for ~1.2 s, holding a dead circuit open
        try:
            return await stream.read(READ_SIZE)
        except StreamError:
            return None

    async def _relay_data(
        self, src_stream: INetStream, dst_stream: INetStream, *args: Any, **kwargs: Any
    ) -> None:
        try:
            await super()._relay_data(src_stream, dst_stream, *args, **kwargs)
        finally:
            await self._close_stream(src_stream)
            await self._close_stream(dst_stream)


class Relaying:
    """The relay protocol on one host, and the reservations it holds on relays."""

    def __init__(self, host: HearthHost, hop_allowed: Callable[[str], bool]) -> None:
        self.host = host
        self.hop_allowed = hop_allowed
        self.protocol = CircuitRelay(host.host, allow_hop=True)
        self.transport = CircuitV2Transport(
            host.host, self.protocol, RelayConfig(roles=RelayRole.STOP)
        )
        self._nursery: trio.Nursery | None = None

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[Relaying]:
        async with background_trio_service(self.protocol), trio.open_nursery() as nursery:
            await self.protocol.event_started.wait()
            hop = self.protocol._handle_hop_stream

            async def guarded(stream: INetStream) -> None:
                peer = str(stream.muxed_conn.peer_id)
                if not self.hop_allowed(peer):
                    log.info("relay request from %s refused (no relay role, or not a member)", peer)
                    await stream.reset()
                    return
                await hop(stream)

            self.host.host.set_stream_handler(HOP_PROTOCOL, guarded)
            self._nursery = nursery
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()

    async def reserve(self, relay: str, addrs: list[str]) -> list[str]:
        """Reserve a slot on `relay`; returns the circuit addresses that reach this host."""
        assert self._nursery is not None, "Relaying.run() first"
        try:
            with trio.fail_after(RESERVE_TIMEOUT_S):
                await self.host.connect(relay, [a for a in addrs if not is_circuit(a)])
                stream = await self.host.host.new_stream(ID.from_base58(relay), [HOP_PROTOCOL])
                ok = await self.transport.reserve(stream, ID.from_base58(relay), self._nursery)
        except HearthError as exc:
            raise HearthError(exc.code, f"relay reservation failed: {exc.message}") from exc
        except trio.TooSlowError as exc:
            raise HearthError(
                ErrorCode.TIMED_OUT, f"relay reservation failed: {relay} did not answer"
            ) from exc
        except Exception as exc:
            raise HearthError(
                ErrorCode.REFUSED,
                f"relay reservation failed: {relay} would not relay for us ({exc})",
            ) from exc
        if not ok:
            raise HearthError(
                ErrorCode.REFUSED, f"relay reservation failed: {relay} refused the reservation"
            )
        return circuit_addrs(addrs, relay, self.host.peer_id)
