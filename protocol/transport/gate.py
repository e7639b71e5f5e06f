"""The roster gate: after Noise has authenticated a peer id, admit only members.

A peer that knows the swarm key but is not on the roster gets no connection, and
so no stream, whatever it knows. Admitted connections are recorded for liveness.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from libp2p.abc import IRawConnection, ISecureConn
from libp2p.crypto.keys import KeyPair, PrivateKey
from libp2p.peer.id import ID
from libp2p.security.exceptions import HandshakeFailure
from libp2p.security.noise.transport import Transport as NoiseTransport

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .pnet import StampedConn

Admit = Callable[[str], bool]


def gate_refusal(peer_id: str) -> HearthError:
    """What a dialer makes of a peer that closed the connection right after Noise."""
    return HearthError(
        ErrorCode.REFUSED,
        f"{peer_id} closed the connection after authentication "
        "(refused by its gate: not on its roster, or revoked)",
    )


class NotAdmitted(HandshakeFailure):
    """The authenticated peer is not on the roster."""


class Liveness:
    """When bytes last arrived from each peer, over any of its connections."""

    def __init__(self) -> None:
        self._conns: dict[str, weakref.WeakSet[StampedConn]] = {}

    def track(self, peer_id: str, conn: IRawConnection) -> None:
        if isinstance(conn, StampedConn):
            self._conns.setdefault(peer_id, weakref.WeakSet()).add(conn)

    def last_rx(self, peer_id: str) -> float | None:
        conns = self._conns.get(peer_id)
        if not conns:
            return None
        return max(c.last_rx for c in conns)


class GatedNoise(NoiseTransport):
    """Noise XX, then the roster check on the authenticated remote peer id."""

    def __init__(
        self, keypair: KeyPair, noise_privkey: PrivateKey, *, admit: Admit, liveness: Liveness
    ) -> None:
        super().__init__(keypair, noise_privkey)
        self._admit = admit
        self._liveness = liveness

    async def secure_inbound(self, conn: IRawConnection) -> ISecureConn:
        return await self._checked(conn, await super().secure_inbound(conn))

    async def secure_outbound(self, conn: IRawConnection, peer_id: ID) -> ISecureConn:
        return await self._checked(conn, await super().secure_outbound(conn, peer_id))

    async def _checked(self, raw: IRawConnection, secure: ISecureConn) -> ISecureConn:
        peer = str(secure.get_remote_peer())
        if not self._admit(peer):
            await secure.close()
            raise NotAdmitted(f"peer {peer} is not on the roster")
        self._liveness.track(peer, raw)
        return secure
